"""The ledger side of checkpoints: a session's state, its owed deep pass, its running pass.

The decision itself is pure (:mod:`reflect_jobs.checkpoints`); this module reads and
writes what it needs between captures (ARCHITECTURE §14.1):

* :func:`state` / :func:`record`: the session's checkpoint level and last fill, written in
  prepare's verdict commit, so a capture that made a pass (or decided not to) is recorded
  exactly when its job moves on.
* :func:`idle_due`: sessions whose last Stop is older than ``REFLECT_SESSION_IDLE_SEC``
  without a deep pass since — the idle sweep captures them.
* :func:`running_pass`: another job of the same session still in flight. Only one pass per
  session runs at a time; a later capture (the final one included) waits for it and then
  reads from the offset that pass committed, never dropped and never paid twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypeVarTuple

from sqlalchemy import ColumnElement, Select, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..checkpoints import PassPlan, SessionState
from .models import Job, SessionCheckpoint, utcnow
from .watermarks import session_key


def state(
    session: Session, harness: str, session_id: str | None, transcript_path: str
) -> SessionState | None:
    """The session's checkpoint state, or None before its first recorded capture.

    Args:
        session: An open ledger session.
        harness: The job's harness.
        session_id: The job's session id (``unknown``: keyed by the transcript path).
        transcript_path: The job's transcript.

    Returns:
        The :class:`SessionState` (level passed, fill last seen).
    """
    row = session.get(SessionCheckpoint, (harness, session_key(session_id, transcript_path)))
    return None if row is None else SessionState(int(row.level), float(row.fill_pct))


def record(
    session: Session,
    *,
    harness: str,
    session_id: str,
    transcript_path: str,
    plan: PassPlan,
    idle_sec: int,
    now: datetime | None = None,
) -> None:
    """Store what this capture decided — called in prepare's verdict transaction.

    A deep pass clears the owed idle pass; any other capture (a checkpoint pass or a Stop
    that made none) owes one at ``now + idle_sec``, pushed out by every later capture.

    Args:
        session: The verdict's open write session.
        harness: The job's harness.
        session_id: The job's session id.
        transcript_path: The job's transcript.
        plan: The decision (:func:`reflect_jobs.checkpoints.plan_pass`).
        idle_sec: ``REFLECT_SESSION_IDLE_SEC``.
        now: The time of the verdict (default: now, UTC).
    """
    now = now or utcnow()
    key = (harness, session_key(session_id, transcript_path))
    row = session.get(SessionCheckpoint, key, with_for_update=True)
    if row is None:
        row = SessionCheckpoint(harness=harness, session_key=key[1], passes=0)
        try:
            with session.begin_nested():
                session.add(row)
        except IntegrityError:  # recorded meanwhile by another consumer: update that one
            row = session.get(SessionCheckpoint, key, with_for_update=True, populate_existing=True)
            if row is None:
                return
    row.session_id, row.transcript_path = session_id, transcript_path
    row.level, row.fill_pct = plan.level_after, plan.fill_pct
    row.passes = int(row.passes or 0) + (1 if plan.make_pass else 0)
    row.last_capture_at = row.updated_at = now
    row.idle_due_at = None if plan.kind == "deep" else now + timedelta(seconds=idle_sec)


def idle_due(
    session: Session, now: datetime | None = None, limit: int = 100
) -> list[SessionCheckpoint]:
    """Sessions owed a deep pass: their idle time passed and no job of theirs is in flight.

    Args:
        session: An open ledger session.
        now: The time to compare with (default: now, UTC).
        limit: At most this many, oldest first.

    Returns:
        The rows; the sweep captures each and clears ``idle_due_at``.
    """
    now = now or utcnow()
    rows = session.scalars(
        select(SessionCheckpoint)
        .where(SessionCheckpoint.idle_due_at.is_not(None), SessionCheckpoint.idle_due_at <= now)
        .order_by(SessionCheckpoint.idle_due_at)
        .limit(limit)
    ).all()
    return [r for r in rows if not _in_flight(session, r.harness, r.session_id)]


def clear_idle(session: Session, harness: str, key: str) -> None:
    """Mark a session's owed deep pass as captured (the sweep made its capture).

    Args:
        session: An open write session.
        harness: The session's harness.
        key: Its ``session_key``.
    """
    row = session.get(SessionCheckpoint, (harness, key), with_for_update=True)
    if row is not None:
        row.idle_due_at = None


#: States of a job whose pass may still run (a person's states — halted, poisoned — do not
#: hold the session: its next capture covers what they did not commit).
_ACTIVE = ("queued", "running", "deferred", "retrying")


_Ts = TypeVarTuple("_Ts")


def _passing(
    q: Select[*_Ts], harness: str, session_id: str, *more: ColumnElement[bool]
) -> Select[*_Ts]:
    """``q`` narrowed to the session's jobs whose pass is in flight: active and at
    ``write``/``add``, or running (or any of ``more``)."""
    return q.where(
        Job.harness == harness,
        Job.session_id == session_id,
        Job.state.in_(_ACTIVE),
        or_(Job.stage.in_(("write", "add")), Job.state == "running", *more),
    )


def _in_flight(session: Session, harness: str, session_id: str) -> bool:
    """Whether the session has a job that will still reflect on it (the sweep then waits)."""
    q = _passing(select(Job.id), harness, session_id, Job.accepting.is_(True))
    return session.scalar(q.limit(1)) is not None


def running_pass(session: Session, job: Job) -> tuple[str, datetime | None] | None:
    """Another job of ``job``'s session whose pass is in flight, if any.

    In flight: at ``write`` or ``add`` and not waiting for a person, or ``running`` at any
    stage. A session with an unknown id has no siblings (its id names no session).

    Args:
        session: The claim's open session.
        job: The job about to prepare.

    Returns:
        ``(id, due)`` of the other job — ``due`` is when a job that is not running runs
        next (a deferred or retrying pass), None while it runs — or None when this job may
        go on.
    """
    if not job.session_id or job.session_id == "unknown":
        return None
    q = _passing(select(Job.id, Job.state, Job.next_run_at), job.harness, job.session_id)
    row = session.execute(q.where(Job.id != job.id).order_by(Job.created_at).limit(1)).first()
    if row is None:
        return None
    return str(row.id), (None if row.state == "running" else row.next_run_at)
