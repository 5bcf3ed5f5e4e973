"""Gates: one shape for everything that can stop work before money is spent (ARCHITECTURE §2.2).

A gate is asked once, and answers either :class:`Go` — pass, holding what it took (a
write slot, a budget unit, a claim, a lock) — or :class:`Defer` — not now, until ``T``,
because ``R``. What a gate took is given back through the gate itself: :meth:`Gate.release`
when the work no longer needs it (a slot, once the paid answer is recorded) and
:meth:`Gate.refund` when the work turned out free (a budget unit, a dedupe claim).

Before this module the 19 gates came in seven shapes (booleans, ``Deferral`` objects,
``None`` slots, context managers raising ``TaskLockedException``, ``False`` claims…), and
the paid path's order — write lease, then the quota gate, then the caps — was written out
twice. Now each owner (``limits.py``, ``write_lease.py``, ``writer/quota.py``,
``ledger/control.py``, ``tasks.py``, ``reflections/dedupe_run.py``, ``pipeline/prepare_gates.py``)
implements :class:`Gate`, and the paid path's order is :data:`PAID_PATH`, the one list
:func:`in_order` sorts by and ARCHITECTURE's gates table shows.

Standard library only and no package imports: every owner imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

#: The order of the gates on a paid pass, first asked first (ARCHITECTURE §2.2 shows the
#: same list). The free gates come first; a recorded answer (already paid) skips from
#: ``recorded_answer`` on; the write slot is taken before the quota gate and the caps so
#: that they decide on the latest telemetry (ARCHITECTURE §4).
PAID_PATH: tuple[str, ...] = (
    "kill_switch",  # REFLECT_DISABLED: nothing runs
    "dry_run",  # REFLECT_DRAIN_DRY_RUN: read-only, the log says what would run
    "claim",  # the job's compare-and-set claim / the dedupe pass's last-run flag
    "halt",  # the write stage's halt flag (an install fault; `resume` clears it)
    "recorded_answer",  # an answer paid for before a crash: reused, the rest skipped
    "slice",  # the prompt's slice file is still there (else back to prepare)
    "write_lease",  # one of REFLECT_WRITE_CONCURRENCY paid calls in flight
    "job_lease",  # our claim on the job still holds (renewed for the call)
    "quota",  # the quota gate, on the latest telemetry
    "caps",  # one budget unit (daily, per window), refunded by a free outcome
)


@dataclass(frozen=True)
class Go:
    """The gate lets the work through.

    ``taken`` is what it took, handed back to the same gate's :meth:`Gate.release` and
    :meth:`Gate.refund` (a slot, a reservation, the flag value a claim replaced…); gates
    that take nothing leave it ``None``.
    """

    gate: str
    taken: Any = None


@dataclass(frozen=True)
class Defer:
    """The gate holds the work: not now, until ``until``, because ``reason``.

    ``until`` is when the work may be asked again (UTC); ``None`` when no time ends it —
    something else must change first (a person's ``resume``, the kill switch turned off,
    our lease on the job lost). ``outcome`` is set by the gates whose answer is final for
    this job (prepare's free skips: ``stale``, ``skip_unchanged``, ``skip_restricted``…):
    the job ends with that free outcome instead of waiting. ``error_kind`` names the
    errors-ledger kind a deferral is reported under, when it is reported (the quota gate).
    Nothing is charged for a deferral, ever.
    """

    gate: str
    reason: str
    until: datetime | None = None
    outcome: str = ""
    error_kind: str = ""


class Gate(Protocol):
    """One gate: asked once, answers :class:`Go` or :class:`Defer`, gives back what it took.

    ``name`` is its place in :data:`PAID_PATH` (or a free gate's own name). ``acquire``
    must not hold anything when it answers :class:`Defer`. ``release`` and ``refund`` are
    called at most once each per :class:`Go`, and do nothing for a gate that took nothing.
    """

    name: str

    def acquire(self) -> Go | Defer:
        """Pass (holding what was taken) or say until when and why not."""
        ...

    def release(self, go: Go) -> None:
        """The work no longer needs what ``go`` took (a slot, a lock): give it back."""
        ...

    def refund(self, go: Go) -> None:
        """The work turned out free: give back what it was charged (a unit, a claim)."""
        ...


class FreeGate:
    """A gate that takes nothing: :meth:`release` and :meth:`refund` do nothing.

    Subclasses set ``name`` and implement ``acquire``.
    """

    name = "free"

    def acquire(self) -> Go | Defer:
        """Pass; a subclass says when not.

        Returns:
            ``Go`` (this base class never defers).
        """
        return Go(self.name)

    def release(self, go: Go) -> None:
        """Nothing was taken.

        Args:
            go: The pass this gate gave.
        """

    def refund(self, go: Go) -> None:
        """Nothing was charged.

        Args:
            go: The pass this gate gave.
        """


class Check(FreeGate):
    """A free gate made of one question: ``check()`` returns a :class:`Defer` or ``None``.

    Args:
        name: The gate's name.
        check: Why not (a ``Defer``), or ``None`` to pass.
    """

    def __init__(self, name: str, check: Callable[[], Defer | None]) -> None:
        """Wrap ``check`` as a gate named ``name``."""
        self.name = name
        self._check = check

    def acquire(self) -> Go | Defer:
        """Ask the question.

        Returns:
            The ``Defer`` it gave, else ``Go``.
        """
        return self._check() or Go(self.name)


@dataclass
class Passage:
    """What a sequence of gates took, given back in reverse order (each at most once)."""

    held: list[tuple[Gate, Go]] = field(default_factory=list)
    _released: bool = False
    _refunded: bool = False

    def release(self) -> None:
        """Give back what the work no longer needs (slots, locks); a second call does nothing."""
        if self._released:
            return
        self._released = True
        for gate, go in reversed(self.held):
            gate.release(go)

    def refund(self) -> None:
        """The work was free: give back what it was charged; a second call does nothing."""
        if self._refunded:
            return
        self._refunded = True
        for gate, go in reversed(self.held):
            gate.refund(go)

    def give_back(self) -> None:
        """Nothing happened after all: refund and release everything."""
        self.refund()
        self.release()


def in_order(gates: Iterable[Gate], order: Sequence[str] = PAID_PATH) -> list[Gate]:
    """The gates sorted by their place in ``order`` (:data:`PAID_PATH`).

    Args:
        gates: Gates named in ``order``.
        order: The list that decides (the paid path's, unless a pass has its own).

    Returns:
        The same gates, first asked first.

    Raises:
        ValueError: A gate whose name is not in ``order``: its place would be a guess.
    """
    place = {name: i for i, name in enumerate(order)}
    out = list(gates)
    for gate in out:
        if gate.name not in place:
            raise ValueError(f"gate {gate.name!r} has no place in the paid path")
    return sorted(out, key=lambda g: place[g.name])


def acquire(gates: Iterable[Gate], *, on_go: Callable[[Go], None] | None = None) -> Passage | Defer:
    """Ask the gates in the order given; the first :class:`Defer` stops and wins.

    A deferral gives back (refunds and releases) everything the earlier gates took, so a
    deferred piece of work holds nothing and is charged nothing. So does an exception from
    a gate or from ``on_go``, which then propagates.

    Args:
        gates: The gates, first asked first (see :func:`in_order`).
        on_go: Called after each gate passed, holding what it took (a failpoint: a kill
            while a write slot is held).

    Returns:
        A :class:`Passage` holding what every gate took, or the first :class:`Defer`.
    """
    passage = Passage()
    try:
        for gate in gates:
            answer = gate.acquire()
            if isinstance(answer, Defer):
                passage.give_back()
                return answer
            passage.held.append((gate, answer))
            if on_go is not None:
                on_go(answer)
    except BaseException:
        passage.give_back()
        raise
    return passage


def first_defer(gates: Iterable[Gate]) -> Defer | None:
    """Ask free gates in order: the first :class:`Defer`, or ``None`` when all pass.

    For gates that take nothing (a :class:`Check`): nothing is held either way.

    Args:
        gates: The gates, first asked first.

    Returns:
        The first ``Defer``, or ``None``.
    """
    answer = acquire(gates)
    if isinstance(answer, Defer):
        return answer
    answer.release()
    return None


def kill_switch(disabled: bool) -> Check:
    """``REFLECT_DISABLED``: nothing runs; the work keeps its place (no claim, no move).

    Args:
        disabled: ``Settings.disabled``.

    Returns:
        The gate (``kill_switch``).
    """
    return Check(
        "kill_switch",
        lambda: Defer("kill_switch", "REFLECT_DISABLED is set") if disabled else None,
    )


def dry_run(enabled: bool) -> Check:
    """``REFLECT_DRAIN_DRY_RUN``: read-only; the log says what would run, nothing moves.

    Args:
        enabled: ``Settings.dry_run``.

    Returns:
        The gate (``dry_run``).
    """
    return Check(
        "dry_run",
        lambda: Defer("dry_run", "REFLECT_DRAIN_DRY_RUN is set") if enabled else None,
    )
