"""Recording a capture: one job per session while it accepts captures (ARCHITECTURE §3).

Split from :mod:`.jobs` (the state machine): coalescing captures of one session into one job
and the spool's count-once check are the capture stage's ledger side; every state change
still goes through :func:`.jobs.transition`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    Connection,
    CursorResult,
    Executable,
    Row,
    Table,
    bindparam,
    select,
    text,
    update,
)
from sqlalchemy import insert as insert_
from sqlalchemy.orm import Session

from ..lifecycle import RUNNABLE_STATES as RUNNABLE
from .gateway import JobRow
from .jobs import new_job_id
from .models import Job, JobEvent, Transcript, transcript_key, utcnow
from .upsert import upsert


@dataclass(frozen=True)
class CaptureResult:
    """What :func:`record_capture` did: the job, whether it is new, and when it prepares."""

    job_id: str
    created: bool
    prepare_at: datetime


def record_capture(
    session: Session | Connection,
    *,
    harness: str,
    session_id: str,
    transcript_path: str,
    event: str,
    size: int | None,
    mtime: float | None,
    settle_sec: int,
    now: datetime | None = None,
    capture_id: str | None = None,
    deep: bool = False,
    cwd: str | None = None,
) -> CaptureResult:
    """Create the session's job, or coalesce into the one still accepting captures.

    The partial unique index on ``(harness, session_id) WHERE accepting`` makes this safe
    under concurrent hooks: the insert is ``ON CONFLICT DO NOTHING`` on it, and a capture
    whose insert found the session's accepting job coalesces into it instead. Coalescing pushes the settle time out, so a burst of PreCompact,
    Stop and SessionEnd becomes one prepare after the session goes quiet.

    Args:
        session: An open write session, or a gateway transaction's connection
            (:mod:`.gateway`: the capture stage's hot path runs in Core).
        harness: Which agent wrote the transcript (``claude``, ``codex``…).
        session_id: The harness's session id; one accepting job exists per harness and id.
        transcript_path: The transcript file; a coalesced capture replaces the stored one.
        event: The hook event that fired (or ``manual``, ``backfill``).
        size: The transcript's size in bytes, if known.
        mtime: Its modification time (epoch seconds), if known.
        settle_sec: Seconds to wait for further captures before preparing.
        now: The capture time; defaults to the current UTC time.
        capture_id: The hook's spool entry id, written into the event's detail as
            ``[capture <id>]`` so that :func:`capture_recorded` can tell that this capture
            is in the ledger (``None`` for captures that were never spooled).
        deep: The capture asks for a deep pass (ARCHITECTURE §14.1); sticky on a coalesced
            job, so a Stop arriving after a SessionEnd does not make it a checkpoint.
        cwd: The session's working directory from the hook payload (the data boundary is
            told it); a coalesced capture with one replaces the stored one.

    Returns:
        The job's id, ``created`` (``False`` when coalesced), and when prepare may run: for
        a coalesced runnable job the later of its previous time and now + ``settle_sec``.

    Raises:
        RuntimeError: Three attempts in a row found the session's accepting job in the way
            of the insert and gone by the time it was read.
    """
    now = now or utcnow()
    prepare_at = now + timedelta(seconds=settle_sec)
    tag = f" {CAPTURE_TAG}{capture_id}]" if capture_id else ""
    dialect = (session.get_bind() if isinstance(session, Session) else session).dialect.name
    for _ in range(3):
        # The new job first: on the partial unique index a session's second capture
        # inserts nothing (no exception, no savepoint) and coalesces below.
        job_id = new_job_id()
        row = {
            "id": job_id,
            "harness": harness,
            "session_id": session_id,
            "transcript_path": transcript_path,
            "event": event,
            "transcript_size": size,
            "transcript_mtime": mtime,
            "stage": "prepare",
            "state": "queued",
            "next_run_at": prepare_at,
            "accepting": True,
            "deep": deep,
            "cwd": cwd,
            "created_at": now,
            "updated_at": now,
        }
        if _inserted(session, dialect, row):
            _event(
                session,
                job_id,
                now,
                "capture",
                "prepare",
                None,
                "queued",
                f"captured ({event}){tag}",
            )
            return CaptureResult(job_id, True, prepare_at)
        existing = session.execute(
            _SELECT_ACCEPTING, {"harness": harness, "session_id": session_id}
        ).first()
        if existing is None:
            continue  # its job stopped accepting meanwhile (claimed): try a new one again
        next_run_at = existing.next_run_at
        if existing.state in RUNNABLE:
            next_run_at = max(prepare_at, existing.next_run_at or prepare_at)
        session.execute(
            update(JOBS)
            .where(JOBS.c.id == existing.id)
            .values(
                captures=JOBS.c.captures + 1,
                transcript_path=transcript_path,
                transcript_size=size,
                transcript_mtime=mtime,
                event=event,
                deep=bool(existing.deep) or deep,
                cwd=cwd or existing.cwd,
                updated_at=now,
                next_run_at=next_run_at,
            )
        )
        _expire(session, existing.id)
        _event(
            session,
            existing.id,
            now,
            existing.stage,
            existing.stage,
            existing.state,
            existing.state,
            f"coalesced capture ({event}){tag}",
        )
        return CaptureResult(existing.id, False, next_run_at or prepare_at)
    raise RuntimeError(f"could not record capture for {harness}/{session_id}")


JOBS = cast(Table, Job.__table__)
EVENTS = cast(Table, JobEvent.__table__)
_INSERT_EVENT = insert_(EVENTS)
_SELECT_ACCEPTING = select(
    JOBS.c.id, JOBS.c.stage, JOBS.c.state, JOBS.c.next_run_at, JOBS.c.deep, JOBS.c.cwd
).where(
    JOBS.c.harness == bindparam("harness"),
    JOBS.c.session_id == bindparam("session_id"),
    JOBS.c.accepting.is_(True),
)


@functools.lru_cache(maxsize=4)
def _insert_new(dialect: str, returning: bool) -> Executable:
    """``INSERT`` a session's new job unless one of its jobs accepts captures (the partial
    unique index ``uq_jobs_accepting_session``), on SQLite and PostgreSQL alike."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
    else:  # pragma: no cover - the ledger runs on SQLite or PostgreSQL only
        raise NotImplementedError(f"capture on {dialect}")
    stmt = insert(JOBS).on_conflict_do_nothing(
        index_elements=[JOBS.c.harness, JOBS.c.session_id], index_where=text("accepting")
    )
    return stmt.returning(JOBS.c.id) if returning else stmt


def _inserted(session: Session | Connection, dialect: str, row: dict[str, Any]) -> bool:
    """Run the insert; whether it made the row (``RETURNING`` where the database has it:
    psycopg reports no row count for ``ON CONFLICT DO NOTHING``)."""
    bind = session.get_bind() if isinstance(session, Session) else session
    returning = bool(bind.dialect.insert_returning)
    result = session.execute(_insert_new(dialect, returning), row)
    if returning:
        return result.first() is not None
    return cast("CursorResult[Any]", result).rowcount == 1


def _event(
    session: Session | Connection,
    job_id: str,
    at: datetime,
    from_stage: str,
    to_stage: str,
    from_state: str | None,
    to_state: str,
    detail: str,
) -> None:
    session.execute(
        _INSERT_EVENT,
        {
            "job_id": job_id,
            "at": at,
            "from_stage": from_stage,
            "to_stage": to_stage,
            "from_state": from_state,
            "to_state": to_state,
            "outcome": None,
            "detail": detail,
            "worker": None,
        },
    )


def _expire(session: Session | Connection, job_id: str) -> None:
    """A ``Job`` this ORM session loaded before the coalescing UPDATE is stale now."""
    if isinstance(session, Session):
        loaded = session.identity_map.get(session.identity_key(Job, job_id))
        if loaded is not None:
            session.expire(loaded)


CAPTURE_TAG = "[capture "


def capture_recorded(
    session: Session | Connection, *, harness: str, session_id: str, capture_id: str
) -> bool:
    """Whether the capture with this spool id is already in the ledger.

    A spooled capture can reach the capture stage twice: by its queue message and by the
    spool's recovery (the message was slow, or the worker died after its commit but before
    deleting the entry, or a worker on another machine recorded it). The second one must
    not count again, so :func:`record_capture` tags its event with the id and this looks
    it up among the session's jobs' events.

    Args:
        session: An open session.
        harness: The capture's harness.
        session_id: The capture's session id (only this session's jobs are searched).
        capture_id: The spool entry id; must come from ``spool.valid_id`` (no wildcards).

    Returns:
        True when an event of one of the session's jobs carries ``[capture <id>]``.
    """
    found = session.scalar(
        select(JobEvent.id)
        .join(Job, Job.id == JobEvent.job_id)
        .where(
            Job.harness == harness,
            Job.session_id == session_id,
            JobEvent.detail.like(f"%{CAPTURE_TAG}{capture_id}]%"),
        )
        .limit(1)
    )
    return found is not None


def last_transcript(session: Session | Connection, path: str) -> Row[Any] | None:
    """The transcript's row as its last finished job left it (prepare's ``unchanged`` gate).

    Args:
        session: An open ledger session or gateway connection.
        path: The transcript file.

    Returns:
        The row (``size``, ``mtime``, ``last_job_id``, ``last_outcome``…), or None.
    """
    return session.execute(_SELECT_TRANSCRIPT, {"path": transcript_key(path)}).first()


_TRANSCRIPTS = cast(Table, Transcript.__table__)
_SELECT_TRANSCRIPT = select(_TRANSCRIPTS).where(_TRANSCRIPTS.c.path == bindparam("path"))


def remember_transcript(
    session: Session | Connection, job: Job | JobRow, now: datetime | None = None
) -> None:
    """Record the transcript's size, mtime and last outcome as of this finished job.

    The next capture of an unchanged transcript is then skipped for free (prepare's
    ``unchanged`` gate). One upsert on SQLite and PostgreSQL (``INSERT … ON CONFLICT DO
    UPDATE``): a finishing job does not read the row first — that read flushed the whole
    verdict early and cost a statement on every $0 job.

    Args:
        session: The transaction finishing the job (an ORM session or a gateway connection).
        job: The finished job.
        now: The time to record (default: now, UTC).
    """
    upsert(
        session,
        Transcript,
        {"path": transcript_key(job.transcript_path)},
        {
            "harness": job.harness,
            "session_id": job.session_id,
            "last_job_id": job.id,
            "last_outcome": job.outcome,
            "size": job.transcript_size,
            "mtime": job.transcript_mtime,
            "updated_at": now or utcnow(),
        },
    )
