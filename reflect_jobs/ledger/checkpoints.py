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

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Select,
    bindparam,
    literal,
    or_,
    select,
)
from sqlalchemy.orm import Session

from ..checkpoints import PassPlan, SessionState
from .gateway import JobRow
from .models import Job, SessionCheckpoint, utcnow
from .upsert import upsert
from .watermarks import session_key


def state(
    session: Session | Connection, harness: str, session_id: str | None, transcript_path: str
) -> SessionState | None:
    """The session's checkpoint state, or None before its first recorded capture.

    Args:
        session: An open ledger session or gateway connection.
        harness: The job's harness.
        session_id: The job's session id (``unknown``: keyed by the transcript path).
        transcript_path: The job's transcript.

    Returns:
        The :class:`SessionState` (level passed, fill last seen).
    """
    key = {"harness": harness, "key": session_key(session_id, transcript_path)}
    row = session.execute(_SELECT_STATE, key).first()
    return None if row is None else SessionState(int(row.level), float(row.fill_pct))


_SELECT_STATE = select(SessionCheckpoint.level, SessionCheckpoint.fill_pct).where(
    SessionCheckpoint.harness == bindparam("harness"),
    SessionCheckpoint.session_key == bindparam("key"),
)


def record(
    session: Session | Connection,
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
        session: The verdict's open write session (or gateway connection).
        harness: The job's harness.
        session_id: The job's session id.
        transcript_path: The job's transcript.
        plan: The decision (:func:`reflect_jobs.checkpoints.plan_pass`).
        idle_sec: ``REFLECT_SESSION_IDLE_SEC``.
        now: The time of the verdict (default: now, UTC).
    """
    now = now or utcnow()
    upsert(
        session,
        SessionCheckpoint,
        {"harness": harness, "session_key": session_key(session_id, transcript_path)},
        {
            "session_id": session_id,
            "transcript_path": transcript_path,
            "level": plan.level_after,
            "fill_pct": plan.fill_pct,
            "passes": 1 if plan.make_pass else 0,
            "last_capture_at": now,
            "updated_at": now,
            "idle_due_at": None if plan.kind == "deep" else now + timedelta(seconds=idle_sec),
        },
        add=("passes",),
    )


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
    q: Select[*_Ts],
    harness: str | BindParameter[str],
    session_id: str | BindParameter[str],
    *more: ColumnElement[bool],
) -> Select[*_Ts]:
    """``q`` narrowed to the session's jobs whose pass is in flight: active and at
    ``write``/``add``, or running (or any of ``more``)."""
    return q.where(
        Job.harness == harness,
        Job.session_id == session_id,
        # Lists of bound values, not expanding IN parameters: the statement is built once
        # and an expanding list is re-rendered at every execution.
        Job.state.in_([literal(s) for s in _ACTIVE]),
        or_(Job.stage.in_([literal("write"), literal("add")]), Job.state == "running", *more),
    )


def _in_flight(session: Session, harness: str, session_id: str) -> bool:
    """Whether the session has a job that will still reflect on it (the sweep then waits)."""
    q = _passing(select(Job.id), harness, session_id, Job.accepting.is_(True))
    return session.scalar(q.limit(1)) is not None


def running_pass(
    session: Session | Connection, job: Job | JobRow
) -> tuple[str, datetime | None] | None:
    """Another job of ``job``'s session whose pass is in flight, if any.

    In flight: at ``write`` or ``add`` and not waiting for a person, or ``running`` at any
    stage. A session with an unknown id has no siblings (its id names no session).

    Args:
        session: The claim's open session (or gateway connection).
        job: The job about to prepare.

    Returns:
        ``(id, due)`` of the other job — ``due`` is when a job that is not running runs
        next (a deferred or retrying pass), None while it runs — or None when this job may
        go on.
    """
    if not job.session_id or job.session_id == "unknown":
        return None
    row = session.execute(
        _RUNNING_PASS, {"harness": job.harness, "session_id": job.session_id, "job_id": job.id}
    ).first()
    if row is None:
        return None
    return str(row.id), (None if row.state == "running" else row.next_run_at)


#: Built once: a claim asks it for every job (bound per call).
_RUNNING_PASS = (
    _passing(
        select(Job.id, Job.state, Job.next_run_at),
        bindparam("harness"),
        bindparam("session_id"),
    )
    .where(Job.id != bindparam("job_id"))
    .order_by(Job.created_at)
    .limit(1)
)
