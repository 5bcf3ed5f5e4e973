"""When the nightly pass is due: pure, no clock read here (the caller passes ``now``).

``REFLECT_NIGHTLY_AT`` is a local wall-clock time. The pass is due when the last completed
run is older than the most recent such time ("slot"): a worker running at 03:30 runs it then;
a laptop that was asleep at 03:30 runs it once, at its next check after it wakes (the slot
it missed), and not again until the next slot.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

__all__ = ["due", "latest_slot", "parse_at"]


def parse_at(text: str) -> time:
    """``HH:MM`` as a time (``config`` has validated it).

    Args:
        text: ``Settings.nightly_at``.

    Returns:
        The time of day.

    Raises:
        ValueError: Not ``HH:MM``.
    """
    hh, _, mm = text.strip().partition(":")
    return time(int(hh), int(mm))


def latest_slot(now: datetime, at: str) -> datetime:
    """The most recent scheduled time at or before ``now``, in UTC.

    Args:
        now: An aware datetime (any zone); the slot is computed in the local zone.
        at: ``HH:MM`` local.

    Returns:
        An aware UTC datetime.
    """
    local = now.astimezone()
    slot = local.replace(
        hour=parse_at(at).hour, minute=parse_at(at).minute, second=0, microsecond=0
    )
    if slot > local:
        slot -= timedelta(days=1)
    return slot.astimezone(UTC)


def due(now: datetime, at: str, last_done: datetime | None) -> bool:
    """Whether a run is owed: none completed since the latest slot.

    Args:
        now: The current time (aware).
        at: ``HH:MM`` local.
        last_done: When the last run completed (aware UTC), ``None`` when never.

    Returns:
        True when the pass should run now.
    """
    return last_done is None or last_done < latest_slot(now, at)
