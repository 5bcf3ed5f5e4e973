"""Confirmations: who still finds a learning useful, and when (issue 23 item 2).

A learning is *confirmed* when

* a later session's pass UPDATEs it with evidence (``update``; the session must differ from
  the one that created it — a session cannot vouch for itself),
* an agent fetches it whole through the MCP ``get`` tool (``get``), or
* a person accepts it (``person``: ``review accept``, the dashboard).

Each is one ``learning_confirmations`` row (when, which kind, which session) and the
learning keeps the count (``confirmations``) and the time of the last one
(``last_confirmed_at``). The note mirrors both (``confirmations``, ``last_confirmed``;
``pipeline/note_edits.py`` op ``confirm``), so the context store — which the stdlib-only
SessionStart hook reads — knows when a learning was last confirmed: one nobody confirmed
for ``REFLECT_FORGET_UNUSED_DAYS`` is *dormant* (``recall/fading.py``), and any
confirmation revives it.

:func:`record_confirmation` is the one way in, so every site that confirms (the add stage,
the review queue, the worker's ``confirm_learnings`` task) records the same thing. The
confirmation rows are the history: the learning's own history is not snapshotted for them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..lifecycle import ACTIVE, PROPOSED
from ..sanitize import bounded
from .models import Learning, LearningConfirmation, utcnow

#: The kinds of confirmation.
BY_UPDATE = "update"
BY_GET = "get"
BY_PERSON = "person"
KINDS = frozenset({BY_UPDATE, BY_GET, BY_PERSON})
#: A confirmation with no session (an MCP ``get``, a person) counts once per this window
#: for the same learning and kind: an agent fetching a note ten times in a loop is one use.
SESSIONLESS_WINDOW = timedelta(days=1)


def record_confirmation(
    session: Session,
    learning_id: str,
    *,
    by: str,
    session_id: str | None,
    at: datetime | None = None,
) -> Learning | None:
    """Record one confirmation of a learning, if it counts.

    Counted once per learning, kind and session (a session-less one once per
    :data:`SESSIONLESS_WINDOW`); an ``update`` from the session that created the learning
    does not count; only an active or proposed learning is confirmed (a forgotten,
    retired or stale one stays out until a person restores it).

    Args:
        session: An open write session (the caller's commit records it).
        learning_id: The learning.
        by: ``update``, ``get`` or ``person``.
        session_id: The confirming harness session, if known.
        at: When (default now).

    Returns:
        The learning row with ``confirmations`` and ``last_confirmed_at`` advanced, or
        ``None`` when nothing was recorded.

    Raises:
        ValueError: ``by`` is not one of :data:`KINDS`.
    """
    if by not in KINDS:
        raise ValueError(f"unknown confirmation kind {by!r}; expected one of {sorted(KINDS)}")
    when = at or utcnow()
    sid = bounded(session_id, 200) if session_id else None
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None or row.status not in (ACTIVE, PROPOSED):
        return None
    if by == BY_UPDATE and (not sid or sid == row.session_id):
        return None  # a session cannot confirm what it learned itself
    seen = select(LearningConfirmation.id).where(
        LearningConfirmation.learning_id == learning_id, LearningConfirmation.by == by
    )
    if sid:
        seen = seen.where(LearningConfirmation.session_id == sid)
    else:
        seen = seen.where(
            LearningConfirmation.session_id.is_(None),
            LearningConfirmation.at > when - SESSIONLESS_WINDOW,
        )
    if session.scalar(seen.limit(1)) is not None:
        return None
    session.add(LearningConfirmation(learning_id=learning_id, by=by, session_id=sid, at=when))
    row.confirmations = int(row.confirmations or 0) + 1
    last = row.last_confirmed_at
    row.last_confirmed_at = when if last is None or _aware(last) < _aware(when) else last
    return row


def _aware(value: datetime) -> datetime:
    from datetime import UTC

    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def history(session: Session, learning_id: str, limit: int = 50) -> list[dict[str, str | None]]:
    """A learning's confirmations, newest first.

    Args:
        session: An open session.
        learning_id: The learning.
        limit: At most this many.

    Returns:
        ``[{"at", "by", "session_id"}]`` (``at`` ISO UTC).
    """
    rows = session.scalars(
        select(LearningConfirmation)
        .where(LearningConfirmation.learning_id == learning_id)
        .order_by(LearningConfirmation.at.desc(), LearningConfirmation.id.desc())
        .limit(limit)
    )
    return [{"at": _aware(r.at).isoformat(), "by": r.by, "session_id": r.session_id} for r in rows]


def due_to_forget(session: Session, now: datetime | None = None, limit: int = 500) -> list[str]:
    """Learnings whose own TTL (``forget_after``) has run out and that are still in use.

    Args:
        session: An open session.
        now: The current time (default now).
        limit: At most this many (the sweep runs again within the hour).

    Returns:
        Their ids, the longest overdue first.
    """
    when = now or utcnow()
    return list(
        session.scalars(
            select(Learning.id)
            .where(
                Learning.forget_after.is_not(None),
                Learning.forget_after <= when,
                Learning.status.in_((ACTIVE, PROPOSED)),
            )
            .order_by(Learning.forget_after, Learning.id)
            .limit(limit)
        )
    )


__all__ = [
    "BY_GET",
    "BY_PERSON",
    "BY_UPDATE",
    "KINDS",
    "due_to_forget",
    "history",
    "record_confirmation",
]
