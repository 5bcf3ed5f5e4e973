"""The daily cap and the per-run window cap as queue rate limits (ARCHITECTURE §4).

Counters live in Huey's storage (``storage.incr`` is atomic on SQLite and Redis) under keys
that carry the window number — ``caps:daily:<utc-day>`` and ``caps:run:<epoch//window>`` —
so a new window is simply a new key: there is no reset step to race (the original's
PID-file cap check let one day run to 61 calls against a cap of 20).

A unit is *reserved* before the model call (incr, and if that overshoots the limit,
decrement again and defer) and *refunded* when the attempt turns out to be free, so the
counters never exceed the caps however many workers and consumers race.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypedDict

from reflect_jobs.gates import Defer, Go


class CounterStorage(Protocol):
    """The two counter operations of Huey's storage (SQLite and Redis) that the caps use.

    ``incr(key, amount)`` adds ``amount`` (negative or 0 allowed) to the counter atomically
    and returns the new value, a missing counter counting as 0; ``delete_counter(key)``
    removes the counter (a missing one is fine).
    """

    def incr(self, key: str, amount: int = 1) -> int: ...

    def delete_counter(self, key: str) -> None: ...


@dataclass(frozen=True)
class Reservation:
    """What a successful reserve took, so a refund gives back exactly that."""

    daily_key: str
    run_key: str


@dataclass(frozen=True)
class Deferral:
    """A refused reservation: why (for the log) and when the full window resets (UTC)."""

    reason: str
    until: datetime


#: The writer's daily counter's key prefix; other budgets (the Reflection Store's dedupe
#: pass, ``caps:dedupe:``) count their units under their own.
DAILY_PREFIX = "caps:daily:"


def daily_key(now: float, prefix: str = DAILY_PREFIX) -> str:
    """The daily counter's key for the UTC day containing ``now``.

    Args:
        now: Unix time in seconds.
        prefix: The budget's key prefix (:data:`DAILY_PREFIX` for the writer's).

    Returns:
        ``<prefix>YYYY-MM-DD``, e.g. ``caps:daily:2026-12-02``.
    """
    return prefix + datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def run_key(now: float, window_sec: int) -> str:
    """The run counter's key for the window containing ``now``.

    Windows are aligned to the Unix epoch, not to the first call, so every worker computes
    the same key without coordinating.

    Args:
        now: Unix time in seconds.
        window_sec: Window length in seconds (``REFLECT_DRAIN_DEBOUNCE_SEC``); 0 means
            there is no run window.

    Returns:
        ``caps:run:<window number>``, the number being ``now // window_sec``; ``""`` when
        ``window_sec`` is 0 (no run counter is kept).
    """
    if window_sec <= 0:
        return ""
    return f"caps:run:{int(now // window_sec)}"


def next_day(now: float) -> datetime:
    """When the daily cap in force at ``now`` resets: the next UTC midnight.

    Args:
        now: Unix time in seconds.

    Returns:
        An aware UTC datetime, 00:00 of the UTC day after ``now``'s.
    """
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


def window_end(now: float, window_sec: int) -> datetime:
    """When the run window containing ``now`` ends, i.e. when the run cap resets.

    Args:
        now: Unix time in seconds.
        window_sec: Window length in seconds; 0 means there is no run window.

    Returns:
        An aware UTC datetime: the start of the next window (epoch-aligned, see
        :func:`run_key`); with no run window, the next UTC midnight (only the daily cap
        resets then).
    """
    if window_sec <= 0:
        return next_day(now)
    return datetime.fromtimestamp((int(now // window_sec) + 1) * window_sec, UTC)


class Caps:
    """Reserve/refund budget units against the two windows.

    Args:
        storage: Huey's storage, or anything with its atomic ``incr``/``delete_counter``. Every
            consumer that shares it counts against one budget.
        daily_max: Units allowed per UTC day (``REFLECT_DRAIN_DAILY_MAX``); 0 refuses every
            reservation.
        run_max: Units allowed per run window (``REFLECT_DRAIN_MAX``). 0 means no
            per-window cap, as the README says (before, it refused every reservation: every
            write was deferred for ever without a word).
        window_sec: Run-window length in seconds (``REFLECT_DRAIN_DEBOUNCE_SEC``). 0 means
            no per-window cap (the original's launchd job ran with 0): only the daily cap
            is counted.
        daily_prefix: The daily counter's key prefix: :data:`DAILY_PREFIX` for the writer;
            a separate budget (the dedupe pass: ``caps:dedupe:``, ``window_sec=0``) uses the
            same machinery under its own keys, so neither can spend the other's units.
    """

    def __init__(
        self,
        storage: CounterStorage,
        *,
        daily_max: int,
        run_max: int,
        window_sec: int,
        daily_prefix: str = DAILY_PREFIX,
    ):
        """Bind the caps to ``storage``; nothing is read or written until a call."""
        self.storage = storage
        self.daily_max = daily_max
        self.run_max = run_max
        self.window_sec = window_sec if run_max > 0 else 0  # no run window: no run cap
        self.daily_prefix = daily_prefix

    def reserve(self, now: float | None = None) -> Reservation | Deferral:
        """Take one unit from both windows, or say when to come back.

        The daily counter is incremented first, then the run counter; a counter pushed over
        its cap is decremented again at once (the daily one too when the run cap refuses),
        so no reservation is ever kept above a cap however many workers race.

        Args:
            now: Unix time in seconds; ``None`` means ``time.time()``.

        Returns:
            A :class:`Reservation` holding the two keys to refund, or a :class:`Deferral`
            with the reason and the reset time of the full window: the next UTC midnight
            for the daily cap, the window's end for the run cap.
        """
        now = time.time() if now is None else now
        dkey, rkey = daily_key(now, self.daily_prefix), run_key(now, self.window_sec)
        if self.storage.incr(dkey, 1) > self.daily_max:
            self.storage.incr(dkey, -1)
            return Deferral(f"daily cap {self.daily_max} reached", next_day(now))
        if rkey and self.storage.incr(rkey, 1) > self.run_max:
            self.storage.incr(rkey, -1)
            self.storage.incr(dkey, -1)
            return Deferral(
                f"run cap {self.run_max} per {self.window_sec}s reached",
                window_end(now, self.window_sec),
            )
        return Reservation(dkey, rkey)

    def seed(self, daily_used: int, run_used: int, now: float | None = None) -> None:
        """Raise the current counters to what the ledger says was spent (never lower them).

        The counters live in the queue's storage; a queue file that was garbled and rebuilt
        loses them, and an empty counter would let the day's budget be spent again.

        Args:
            daily_used: Entries spent today (``ledger.costs.spent_now``).
            run_used: Entries spent in the current run window.
            now: Unix time in seconds; ``None`` means ``time.time()``.
        """
        now = time.time() if now is None else now
        dkey, rkey = daily_key(now, self.daily_prefix), run_key(now, self.window_sec)
        for key, used in ((dkey, daily_used), (rkey, run_used)):
            if key and used > (have := self.storage.incr(key, 0)):
                self.storage.incr(key, used - have)

    def refund(self, reservation: Reservation) -> None:
        """Give the unit back: the attempt was free (halt, quarantine, dry run…).

        Args:
            reservation: What :meth:`reserve` returned. Refund it at most once: nothing
                guards the counters against going below what was reserved.
        """
        self.storage.incr(reservation.daily_key, -1)
        if reservation.run_key:
            self.storage.incr(reservation.run_key, -1)

    def prune(self, now: float | None = None, *, keep_days: int = 2) -> None:
        """Delete counters of windows that can no longer be reserved against.

        Keys carry their window, so old ones are never read again; without pruning a
        long-lived install would keep 144 run-window counters a day forever. Called by the
        periodic recovery task; O(1) per call (it deletes a fixed range of past keys).

        Args:
            now: Unix time in seconds; ``None`` means ``time.time()``.
            keep_days: Daily counters of the last ``keep_days`` UTC days (today included)
                are kept; those of the 7 days before are deleted. Run counters of the
                current and the previous window are kept; those of the 24 hours before them
                are deleted. Older keys (recovery did not run for a week) stay behind.
        """
        now = time.time() if now is None else now
        if self.window_sec > 0:
            current = int(now // self.window_sec)
            for back in range(2, 2 + 24 * 3600 // self.window_sec + 1):
                self.storage.delete_counter(f"caps:run:{current - back}")
        for back in range(keep_days, keep_days + 7):
            self.storage.delete_counter(daily_key(now - back * 86400, self.daily_prefix))

    def usage(self, now: float | None = None) -> Usage:
        """Current counters without changing them (incr by 0 reads atomically).

        Args:
            now: Unix time in seconds; ``None`` means ``time.time()``.

        Returns:
            ``day`` (the UTC day, ``YYYY-MM-DD``), ``daily_used``, ``daily_limit``,
            ``run_used``, ``run_limit`` (ints; ``run_limit`` is ``None`` when there is no
            run window) and ``run_resets_at`` (ISO 8601, UTC: the current run window's
            end, or ``None`` with no run window).
        """
        now = time.time() if now is None else now
        rkey = run_key(now, self.window_sec)
        return {
            "day": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d"),
            "daily_used": self.storage.incr(daily_key(now, self.daily_prefix), 0),
            "daily_limit": self.daily_max,
            "run_used": self.storage.incr(rkey, 0) if rkey else 0,
            "run_limit": self.run_max if rkey else None,
            "run_resets_at": window_end(now, self.window_sec).isoformat() if rkey else None,
        }


class Usage(TypedDict):
    """The counters :meth:`Caps.usage` reads (``status`` prints them)."""

    day: str
    daily_used: int
    daily_limit: int
    run_used: int
    run_limit: int | None
    run_resets_at: str | None


class CapsGate:
    """The caps as a gate (:mod:`reflect_jobs.gates`): one unit, refunded by a free outcome.

    Args:
        caps: The budget to reserve from (the writer's, or a pass's own prefix).
        what: Prefixed to a deferral's reason (``"dedupe "`` for the dedupe pass's units).
    """

    name = "caps"

    def __init__(self, caps: Caps, what: str = "") -> None:
        """Bind the gate to ``caps``; nothing is reserved until :meth:`acquire`."""
        self.caps = caps
        self.what = what

    def acquire(self) -> Go | Defer:
        """Reserve one unit (:meth:`Caps.reserve`).

        Returns:
            ``Go`` holding the :class:`Reservation`, or ``Defer`` until the full window
            resets.
        """
        booked = self.caps.reserve()
        if isinstance(booked, Deferral):
            return Defer(self.name, self.what + booked.reason, booked.until)
        return Go(self.name, booked)

    def release(self, go: Go) -> None:
        """A spent unit stays spent: nothing to give back when the call is over.

        Args:
            go: The pass this gate gave.
        """

    def refund(self, go: Go) -> None:
        """The attempt was free: give the unit back (:meth:`Caps.refund`).

        Args:
            go: The pass holding the reservation.
        """
        self.caps.refund(go.taken)
