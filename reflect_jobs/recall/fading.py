"""Fading: dormant learnings and a learning's own TTL (issue 23 item 2; stdlib only).

*Dormant.* A learning nobody confirmed (``ledger/confirmations.py``: a later session's
UPDATE with evidence, an agent's MCP ``get``, a person's acceptance) for
``REFLECT_FORGET_UNUSED_DAYS`` days (default 180, counted from the later of its creation
and its last confirmation — :func:`awake_ts`) is not told at session start; search still
finds it, marked. Nothing is written when a learning falls asleep: dormancy is read off
the clock at every session start, so there is no sweep to miss and the first confirmation
wakes it (the note's ``last_confirmed`` moves, the context store follows). ``0`` turns
fading off.

*Forget after* (seed 003's ``forget_after``): a date, a date-time or a TTL (``30d``,
``12w``, ``6m``, ``1y``) a person puts in an ``add`` file; stored absolute (UTC) in the
note and the ledger, and the worker's hourly sweep forgets the learning once it has
passed (``pipeline/expiry.py``, through ``pipeline/curation.py:forget``).

The SessionStart hook imports this module: nothing here may import beyond the standard
library, and the setting is read through ``envpaths.get`` (the variable, else the user's
config file) as the hook reads every other.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

SETTING = "REFLECT_FORGET_UNUSED_DAYS"
DEFAULT_DAYS = 180
DAY = 86400.0
#: The text mark of a dormant learning (search, ``context --all``).
MARK = "(dormant: not confirmed for {days}+ days; a confirmation revives it)"
_TTL = re.compile(r"^\s*(\d{1,5})\s*([dwmy])\s*$", re.IGNORECASE)
_TTL_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}
#: The longest TTL accepted (a typo of ``3000y`` is refused, not stored).
MAX_TTL_DAYS = 36500


def unused_days(value: object = None) -> int:
    """The dormancy threshold in days (``0``: fading off).

    Args:
        value: The setting's raw value; ``None`` reads ``REFLECT_FORGET_UNUSED_DAYS`` (the
            variable, else the user config file).

    Returns:
        A non-negative integer; an unreadable value is the default.
    """
    if value is None:
        from reflect_jobs.envpaths import get

        value = get(SETTING)
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_DAYS
    try:
        days = int(str(value).strip())
    except ValueError:
        return DEFAULT_DAYS
    return max(days, 0)


def awake_since(days: int, now: float) -> float | None:
    """The oldest ``awake_ts`` a learning may have and still be told.

    Args:
        days: :func:`unused_days`.
        now: The current Unix time.

    Returns:
        ``now − days`` in Unix time, or ``None`` when fading is off.
    """
    return None if days <= 0 else now - days * DAY


def awake_ts(created_ts: float, last_confirmed_ts: float) -> float:
    """Where a learning's dormancy clock starts: the later of creation and last confirmation.

    Args:
        created_ts: Its creation (Unix time; 0 unknown).
        last_confirmed_ts: Its last confirmation (0: never).

    Returns:
        The later of the two (0 when both are unknown: never dormant).
    """
    return max(float(created_ts or 0.0), float(last_confirmed_ts or 0.0))


def is_dormant(awake: object, days: int, now: float) -> bool:
    """Whether a learning is dormant.

    Args:
        awake: Its :func:`awake_ts` (a context-store value; ``""``/0: unknown).
        days: :func:`unused_days`.
        now: The current Unix time.

    Returns:
        True when fading is on, the clock is known, and it started more than ``days`` ago.
    """
    try:
        ts = float(awake or 0.0)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    since = awake_since(days, now)
    return since is not None and ts > 0 and ts < since


def mark(days: int) -> str:
    """The text mark of a dormant learning.

    Args:
        days: :func:`unused_days`.

    Returns:
        ``(dormant: not confirmed for N+ days; a confirmation revives it)``.
    """
    return MARK.format(days=days)


def parse_forget_after(value: object, now: datetime | None = None) -> datetime | None:
    """A ``forget_after`` value as an absolute UTC time.

    Args:
        value: ``None``/empty (no TTL); a date (``2027-01-31``: the end of that day is not
            awaited — the date's start, UTC); an ISO date-time (``Z`` or an offset; naive
            is UTC); or a TTL from ``now``: ``30d``, ``12w``, ``6m`` (30 days), ``1y``.
        now: What a TTL counts from (default now).

    Returns:
        The aware UTC datetime, or ``None`` for no TTL.

    Raises:
        ValueError: Anything else (one line naming the accepted forms).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    text = str(value).strip()
    ttl = _TTL.match(text)
    if ttl:
        days = int(ttl.group(1)) * _TTL_DAYS[ttl.group(2).lower()]
        if days < 1 or days > MAX_TTL_DAYS:
            raise ValueError(f"forget_after {text!r}: between 1 day and {MAX_TTL_DAYS} days")
        return (now or datetime.now(UTC)) + timedelta(days=days)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"forget_after {text[:40]!r}: a date (2027-01-31), an ISO date-time or a TTL"
            " (30d, 12w, 6m, 1y)"
        ) from None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def iso(value: datetime) -> str:
    """A UTC time as the note stores it (``2027-01-31T00:00:00Z``).

    Args:
        value: An aware or naive-UTC datetime.

    Returns:
        The ISO text.
    """
    aware = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return f"{aware:%Y-%m-%dT%H:%M:%SZ}"


#: The worker task that records confirmations (``pipeline/confirm.py``).
CONFIRM_TASK = "reflect_jobs.tasks.confirm_learnings"


def hand_over(entries: list[list[str | None]]) -> bool:
    """Ask the worker to record confirmations (an agent's MCP ``get``) — never raises.

    The MCP answer must not wait on the ledger: one queue push (0.25 s at most) and the
    worker records it (ledger, note, context store). A failure is logged to
    ``hook-errors.log`` and the answer goes out all the same.

    Args:
        entries: ``[[id, by, session or None], …]``.

    Returns:
        True when the message was queued.
    """
    try:
        import os

        from reflect_jobs import fastqueue
        from reflect_jobs.envpaths import queue_url

        url = queue_url()
        if url.startswith("sqlite:///"):
            os.makedirs(os.path.dirname(url[len("sqlite:///") :]) or ".", mode=0o700, exist_ok=True)
        fastqueue.enqueue(url, CONFIRM_TASK, (entries,), timeout=0.25)
        return True
    except Exception as exc:  # noqa: BLE001 - a confirmation is never worth a failed answer
        from reflect_jobs.hook_log import log_error

        log_error(f"confirmation not queued: {type(exc).__name__}: {exc}")
        return False


def dormant_ids(kb_root: str, ids: list[str], now: float | None = None) -> set[str]:
    """Which of ``ids`` are dormant, by the context store (search marks them).

    Args:
        kb_root: The KB root.
        ids: Learning ids (a search's hits).
        now: The current Unix time.

    Returns:
        The dormant ones; empty when fading is off or the store cannot be read (a mark is
        an aid: search answers without it).
    """
    import sqlite3
    import time

    from . import store

    days = unused_days()
    if days <= 0 or not ids:
        return set()
    at = time.time() if now is None else now
    try:
        conn = store.open_for_read(store.store_path(kb_root))
        if conn is None:
            return set()
        try:
            rows = [store.get_row(conn, str(i)) for i in ids[:100]]
        finally:
            conn.close()
    except sqlite3.Error:
        return set()
    return {str(r["id"]) for r in rows if r and is_dormant(r.get("awake_ts"), days, at)}
