"""A CREATE's own ``forget_after``, as the model may set it (seed 003; ARCHITECTURE §6).

Seed 003's TTL is one "the model or a person may set". A person's (``reflect-jobs add``) is
refused with one line when bad; a model's answer is hostile input that must never fail the
job, so a bad value is dropped here — the caller (``writer/actions.py:plan_actions``) keeps
the learning, notes why and counts it. Both read the value with the same parser
(``recall/fading.py:parse_forget_after``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from reflect_jobs.invisible import strip_invisible
from reflect_jobs.recall.fading import iso, parse_forget_after
from reflect_jobs.sanitize import clean_text

#: A CREATE's own ``forget_after`` (seed 003's TTL "the model or a person may set") must
#: fall this far from the answer's time: at least a day (sooner is a task for this session,
#: not a learning), at most two years (a guess beyond that is no better than fading, which
#: puts an unconfirmed learning to sleep after ``REFLECT_FORGET_UNUSED_DAYS``).
FORGET_AFTER_MIN = timedelta(days=1)
FORGET_AFTER_MAX = timedelta(days=730)
#: Longest ``forget_after`` text read (a date-time is 25 characters; a TTL a few).
FORGET_AFTER_MAX_CHARS = 40


def _snippet(value: Any) -> str:
    text = value if isinstance(value, str) else type(value).__name__
    text = " ".join(strip_invisible(clean_text(text[:200])).split())
    return text[:40] + ("…" if len(text) > 40 else "")


def model_forget_after(value: Any, now: datetime) -> tuple[str | None, str | None]:
    """A CREATE's ``forget_after`` as the note stores it, or why it is dropped.

    Read with the parser ``reflect-jobs add`` uses (``recall/fading.py``): a date, an ISO
    date-time or a TTL (``30d``, ``12w``, ``6m``, ``1y``) counted from ``now``; then bounded
    to :data:`FORGET_AFTER_MIN` .. :data:`FORGET_AFTER_MAX` from ``now``. A bad value never
    fails the job: the caller drops it with a counted note and keeps the learning.

    Args:
        value: What the model wrote (any JSON value; missing, ``null`` or ``""``: none).
        now: The answer's time (what a TTL counts from).

    Returns:
        ``(iso, None)`` for a kept value (``2027-01-31T00:00:00Z``), ``(None, why)`` for a
        dropped one, ``(None, None)`` when there is none.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    if not isinstance(value, str) or len(value) > FORGET_AFTER_MAX_CHARS:
        return None, f"forget_after {_snippet(value)!r} is not a date or a TTL"
    try:
        when = parse_forget_after(strip_invisible(clean_text(value)), now)
    except ValueError:
        return None, f"forget_after {_snippet(value)!r} is not a date or a TTL"
    if when is None:
        return None, None
    if when <= now:
        return None, f"forget_after {iso(when)} is already past"
    if when < now + FORGET_AFTER_MIN or when > now + FORGET_AFTER_MAX:
        return None, f"forget_after {iso(when)} is not between 1 day and 2 years away"
    return iso(when), None
