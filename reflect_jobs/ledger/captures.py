"""Recording a capture: one job per session while it accepts captures (ARCHITECTURE §3).

Split from :mod:`.jobs` (the state machine): coalescing captures of one session into one job
and the spool's count-once check are the capture stage's ledger side; every state change
still goes through :func:`.jobs.transition`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..lifecycle import RUNNABLE_STATES as RUNNABLE
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
    session: Session,
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
    under concurrent hooks: the loser of the INSERT race gets an IntegrityError and
    coalesces instead. Coalescing pushes the settle time out, so a burst of PreCompact,
    Stop and SessionEnd becomes one prepare after the session goes quiet.

    Args:
        session: An open write session; a new job is inserted in a savepoint.
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
        RuntimeError: Three attempts in a row lost the insert race and found no job to
            coalesce into.
    """
    now = now or utcnow()
    prepare_at = now + timedelta(seconds=settle_sec)
    tag = f" {CAPTURE_TAG}{capture_id}]" if capture_id else ""
    for _ in range(3):
        existing = session.scalars(
            select(Job).where(
                Job.harness == harness, Job.session_id == session_id, Job.accepting.is_(True)
            )
        ).first()
        if existing is not None:
            existing.captures += 1
            existing.transcript_path = transcript_path
            existing.transcript_size = size
            existing.transcript_mtime = mtime
            existing.event = event
            existing.deep = bool(existing.deep) or deep
            existing.cwd = cwd or existing.cwd
            existing.updated_at = now
            if existing.state in RUNNABLE:
                existing.next_run_at = max(prepare_at, existing.next_run_at or prepare_at)
            session.add(
                JobEvent(
                    job_id=existing.id,
                    at=now,
                    from_stage=existing.stage,
                    to_stage=existing.stage,
                    from_state=existing.state,
                    to_state=existing.state,
                    outcome=None,
                    detail=f"coalesced capture ({event}){tag}",
                )
            )
            session.flush()
            return CaptureResult(existing.id, False, existing.next_run_at or prepare_at)
        job = Job(
            id=new_job_id(),
            harness=harness,
            session_id=session_id,
            transcript_path=transcript_path,
            event=event,
            transcript_size=size,
            transcript_mtime=mtime,
            stage="prepare",
            state="queued",
            next_run_at=prepare_at,
            accepting=True,
            deep=deep,
            cwd=cwd,
            created_at=now,
            updated_at=now,
        )
        try:
            with session.begin_nested():
                session.add(job)
                session.add(
                    JobEvent(
                        job_id=job.id,
                        at=now,
                        from_stage="capture",
                        to_stage="prepare",
                        from_state=None,
                        to_state="queued",
                        detail=f"captured ({event}){tag}",
                    )
                )
            return CaptureResult(job.id, True, prepare_at)
        except IntegrityError:
            continue  # another capture of this session won the race: coalesce into it
    raise RuntimeError(f"could not record capture for {harness}/{session_id}")


CAPTURE_TAG = "[capture "


def capture_recorded(session: Session, *, harness: str, session_id: str, capture_id: str) -> bool:
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


def remember_transcript(session: Session, job: Job, now: datetime | None = None) -> None:
    """Record the transcript's size, mtime and last outcome as of this finished job.

    The next capture of an unchanged transcript is then skipped for free (prepare's
    ``unchanged`` gate). One upsert on SQLite and PostgreSQL (``INSERT … ON CONFLICT DO
    UPDATE``): a finishing job does not read the row first — that read flushed the whole
    verdict early and cost a statement on every $0 job.

    Args:
        session: The transaction finishing the job.
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
