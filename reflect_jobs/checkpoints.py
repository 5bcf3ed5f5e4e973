"""Checkpoints: which capture of a session makes a paid pass, and with which model (pure).

A hook fires on every Stop, but a pass after every turn pays again and again for a session
that has barely moved. A session instead gets a pass when its context fill crosses one of
``REFLECT_CHECKPOINTS`` (20/40/60/80% of ``REFLECT_CONTEXT_WINDOW``), and a *deep* pass when
it compacts or ends (PreCompact, SessionEnd), when it went silent for
``REFLECT_SESSION_IDLE_SEC`` without ending (the ``idle`` capture), or when a person asked
for the capture (``enqueue``, ``backfill``). A Stop that crosses no new threshold makes no
call. Each pass reads only what came after the last committed pass (the session watermark,
ARCHITECTURE §3.1), so a checkpoint costs what was said since the one before.

The state carried between captures is small (:class:`SessionState`): the highest threshold
passed in the current context cycle and the fill seen last. A context that shrank (a
compaction, a cleared conversation) starts a new cycle at the threshold it is at now, so the
thresholds it had passed before fire again as it grows back — but not at once: what the
compaction summarised was just reflected by the PreCompact deep pass.

Standard library only, no I/O: the prepare stage reads the fill and the state and records
the plan's ``level_after`` with its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Hook events that end or compact a session: a deep pass (Claude Code/Codex, Copilot CLI).
DEEP_EVENTS = frozenset({"PreCompact", "SessionEnd", "preCompact", "sessionEnd"})
#: The capture the idle sweep makes for a session whose end never arrived.
IDLE_EVENT = "idle"
#: Captures a person asked for; always deep, whatever ``--event`` said (the job's ``deep``).
PERSON_EVENTS = frozenset({"manual", "backfill"})
#: The outcome of a capture that makes no pass (free; the transcript is not read further).
BELOW_CHECKPOINT = "skip_below_checkpoint"
#: A drop of the fill by more than this many percentage points is a shrunk context.
SHRINK_POINTS = 2.0


def is_deep_event(event: str) -> bool:
    """Whether a capture made by ``event`` asks for a deep pass on its own.

    Args:
        event: The hook event (or ``idle``, ``manual``, ``backfill``).

    Returns:
        True for PreCompact/SessionEnd (either spelling), ``idle`` and the person-made
        ``manual``/``backfill``; False for Stop, agentStop and anything unknown.
    """
    return event in DEEP_EVENTS or event == IDLE_EVENT or event in PERSON_EVENTS


@dataclass(frozen=True)
class SessionState:
    """What earlier captures of the session left: ``level`` passed, ``fill_pct`` seen."""

    level: int = 0
    fill_pct: float = 0.0


@dataclass(frozen=True)
class Models:
    """The models of the three kinds of pass."""

    cheap: str
    drain: str
    deep: str


@dataclass(frozen=True)
class PassPlan:
    """The decision for one capture.

    Attributes:
        make_pass: False: no call, the job ends :data:`BELOW_CHECKPOINT`.
        kind: ``deep``, ``checkpoint``, ``capture`` (checkpoints are off) or ``none``.
        threshold: The checkpoint crossed (``checkpoint`` passes only).
        fill_pct: The context fill now, in percent (0 without usage data).
        model: The writer model of the pass (empty when no pass).
        level_after: The level to record for the session.
        reason: One line for the job's event and the log.
    """

    make_pass: bool
    kind: str
    threshold: int | None
    fill_pct: float
    model: str
    level_after: int
    reason: str

    def stats(self) -> dict[str, object]:
        """The plan as the job's ``prepare_stats["pass"]`` (read back by the write stage).

        Returns:
            ``{"kind", "threshold", "fill_pct", "model"}``.
        """
        return {
            "kind": self.kind,
            "threshold": self.threshold,
            "fill_pct": round(self.fill_pct, 1),
            "model": self.model,
        }


def fill_percent(tokens: int | None, window: int) -> float:
    """Context fill in percent: ``tokens / window``, 0 without usage data, at most 100.

    Args:
        tokens: The latest context size the transcript reports (None: none reported).
        window: ``REFLECT_CONTEXT_WINDOW``.

    Returns:
        The fill, 0.0–100.0.
    """
    if not tokens or window <= 0:
        return 0.0
    return min(100.0, 100.0 * tokens / window)


def floor_threshold(fill: float, thresholds: tuple[int, ...]) -> int:
    """The highest threshold at or below ``fill`` (0 below the first).

    Args:
        fill: A fill in percent.
        thresholds: The ascending checkpoints.

    Returns:
        The threshold, or 0.
    """
    return max((t for t in thresholds if t <= fill), default=0)


def plan_pass(
    *,
    deep: bool,
    tokens: int | None,
    window: int,
    thresholds: tuple[int, ...],
    state: SessionState | None,
    models: Models,
) -> PassPlan:
    """Decide whether this capture makes a pass, of which kind, with which model.

    Args:
        deep: The capture asks for a deep pass (:func:`is_deep_event`, or a person's).
        tokens: The transcript's latest context size (:mod:`reflect_jobs.transcripts.usage`).
        window: ``REFLECT_CONTEXT_WINDOW``.
        thresholds: ``REFLECT_CHECKPOINTS``, ascending; empty = every capture is a pass.
        state: The session's state, None for its first capture.
        models: The cheap, drain and deep models.

    Returns:
        The plan. The lowest threshold's pass uses the cheap model, later ones the drain
        model, a deep pass the deep model; with checkpoints off every capture is a pass
        with the drain model (deep ones with the deep model), as before checkpoints.
    """
    fill = fill_percent(tokens, window)
    here = floor_threshold(fill, thresholds)
    if deep:
        return PassPlan(True, "deep", None, fill, models.deep, here, f"deep pass at {fill:.0f}%")
    if not thresholds:
        return PassPlan(True, "capture", None, fill, models.drain, 0, "checkpoints off")
    prev = state or SessionState()
    if fill < prev.fill_pct - SHRINK_POINTS:
        why = f"context shrank from {prev.fill_pct:.0f}% to {fill:.0f}%: checkpoints start over"
        return PassPlan(False, "none", None, fill, "", here, why)
    if here > prev.level:
        model = models.cheap if here == thresholds[0] else models.drain
        why = f"context {fill:.0f}% crossed {here}%"
        return PassPlan(True, "checkpoint", here, fill, model, here, why)
    why = f"context {fill:.0f}% crosses no new checkpoint (passed {prev.level}%)"
    return PassPlan(False, "none", None, fill, "", prev.level, why)
