"""What a person does to the ledger: list and inspect jobs, retry, purge, resume, errors.

The CLI used to open sessions and run these queries itself, which put a second copy of
ledger rules (which states a retry takes, that a purge removes the slice too, that a resume
re-queues the halted jobs) in a module about printing. Here each one is a plain function
that owns its one short transaction and returns plain data — the stable shapes ``--json``
prints (ARCHITECTURE §9) — so ``reflect_jobs.cli`` only parses, calls and prints, and a test can
call them on a SQLite file without a terminal.

State changes still go through :mod:`.jobs` (:func:`~.jobs.retry_job`,
:func:`~.jobs.transition`), so every move writes its event row. Functions that re-queue jobs
take a ``schedule(stage, job_id)`` callable and call it only after their transaction
commits: a Huey message for a job whose change was rolled back would run a job in the wrong
state, and the ledger must not import the queue.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from . import control, spend
from .db import session_scope
from .jobs import retry_job, transition
from .models import CostRow, ErrorRecord, Job, JobEvent, utcnow

#: The keys of a job in ``jobs --json`` and ``show --json`` (plus ``error``), in order.
JOB_KEYS = (
    "id",
    "harness",
    "session_id",
    "transcript_path",
    "stage",
    "state",
    "outcome",
    "attempts",
    "created_at",
    "updated_at",
    "next_run_at",
)

#: ``schedule(stage, job_id)``: hand a job to its stage's queue (``HueyDispatcher.schedule``).
Schedule = Callable[[str, str], None]


class JobNotFound(LookupError):
    """No job has this id (the message is the one line the CLI prints)."""

    def __init__(self, job_id: str) -> None:
        """Build the exception.

        Args:
            job_id: The id that matched no job.
        """
        super().__init__(f"no job {job_id}")
        self.job_id = job_id


class ErrorNotFound(LookupError):
    """No error record has this id."""

    def __init__(self, error_id: str) -> None:
        """Build the exception.

        Args:
            error_id: The id that matched no error record.
        """
        super().__init__(f"no error {error_id}")
        self.error_id = error_id


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None


def job_dict(job: Job) -> dict[str, Any]:
    """A job as ``jobs --json`` shows it.

    Args:
        job: A loaded job row.

    Returns:
        :data:`JOB_KEYS` (times as ISO 8601 text) and ``error``.
    """
    d = {k: getattr(job, k) for k in JOB_KEYS}
    for k in ("created_at", "updated_at", "next_run_at"):
        d[k] = _iso(d[k])
    d["error"] = job.error
    return d


def _get_job(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job


def list_jobs(db_url: str, *, state: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Jobs, newest first (a read-only snapshot: it never waits for a writer).

    Args:
        db_url: The ledger.
        state: Only jobs in this state (any state when ``None``).
        limit: At most this many.

    Returns:
        One :func:`job_dict` per job.
    """
    with session_scope(db_url, readonly=True) as session:
        q = select(Job).order_by(Job.created_at.desc()).limit(limit)
        if state:
            q = q.where(Job.state == state)
        return [job_dict(j) for j in session.scalars(q)]


def job_detail(db_url: str, job_id: str) -> dict[str, Any]:
    """One job with what ``show`` needs: its products, its events and its cost rows.

    Args:
        db_url: The ledger.
        job_id: The job.

    Returns:
        :func:`job_dict` plus ``prepare_stats``, ``actions``, ``slice_path``, ``recoveries``,
        ``failures``, ``dropped_unevidenced``, ``dropped_forget_after``, ``events`` (oldest
        first) and ``costs`` (oldest first).

    Raises:
        JobNotFound: No job has this id.
    """
    with session_scope(db_url, readonly=True) as session:
        job = _get_job(session, job_id)
        data = job_dict(job)
        data.update(
            prepare_stats=job.prepare_stats,
            actions=job.actions,
            slice_path=job.slice_path,
            recoveries=job.recoveries,
            failures=job.failures,
            # CREATEs dropped because their evidence was not in the slice (ARCHITECTURE §6)
            dropped_unevidenced=int((job.actions or {}).get("dropped_unevidenced") or 0),
            # CREATE forget_after values dropped (unreadable, past or out of range)
            dropped_forget_after=int((job.actions or {}).get("dropped_forget_after") or 0),
        )
        data["events"] = [
            {
                "at": _iso(e.at),
                "stage": e.to_stage,
                "from": e.from_state,
                "to": e.to_state,
                "outcome": e.outcome,
                "detail": e.detail,
                "worker": e.worker,
            }
            for e in session.scalars(
                select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
            )
        ]
        data["costs"] = [
            {
                "at": _iso(c.at),
                "outcome": c.outcome,
                "entries": c.entries,
                "tokens": c.tokens,
                "cost_usd": c.cost_usd,
                "backend": c.backend,
                "model": c.model,
            }
            for c in session.scalars(
                select(CostRow).where(CostRow.job_id == job_id).order_by(CostRow.id)
            )
        ]
    return data


def retry_jobs(
    db_url: str,
    job_ids: Iterable[str] = (),
    *,
    states: Iterable[str] = (),
    schedule: Schedule,
) -> list[tuple[str, str]]:
    """Send poisoned/quarantined/halted jobs back to their stage, all or nothing.

    Every named job must exist and be retryable, or none is retried: one transaction, rolled
    back on the first problem. The jobs are scheduled only after it commits.

    Args:
        db_url: The ledger.
        job_ids: The jobs to retry (ignored when ``states`` is given).
        states: Retry every job in these states instead (``poisoned``, ``quarantined``).
        schedule: Called as ``schedule(stage, job_id)`` for each retried job.

    Returns:
        ``(job_id, stage)`` per retried job, in the order retried.

    Raises:
        JobNotFound: A named job does not exist.
        IllegalTransition: A job is not in a state a person may retry.
    """
    states = tuple(states)
    with session_scope(db_url) as session:
        targets = (
            list(session.scalars(select(Job).where(Job.state.in_(states))))
            if states
            else [_get_job(session, j) for j in job_ids]
        )
        done = [(job.id, retry_job(session, job)) for job in targets]
    for job_id, stage in done:
        schedule(stage, job_id)
    return done


def purge_poisoned(db_url: str, *, confirm: Callable[[int], bool]) -> int | None:
    """Delete poisoned jobs and their slices; their events go with them, cost rows stay.

    ``confirm`` is asked inside the transaction, so the number confirmed is the number
    deleted.

    Args:
        db_url: The ledger.
        confirm: Called with the number of poisoned jobs (only when there are some); False
            cancels.

    Returns:
        How many jobs were deleted, or ``None`` when ``confirm`` declined.

    Raises:
        OSError: A slice could not be removed (nothing is deleted from the ledger then).
    """
    with session_scope(db_url) as session:
        rows = list(session.scalars(select(Job).where(Job.state == "poisoned")))
        if rows and not confirm(len(rows)):
            return None
        for job in rows:
            if job.slice_path and os.path.exists(job.slice_path):
                os.unlink(job.slice_path)
            session.delete(job)
    return len(rows)


@dataclass(frozen=True)
class Resumed:
    """What :func:`resume` did."""

    #: Why the write stage had been halted (``None``: it was not).
    reason: str | None
    #: ``(job_id, stage)`` of each halted job sent back to the queue.
    requeued: list[tuple[str, str]]


def resume(db_url: str, *, schedule: Schedule) -> Resumed:
    """Clear a write-stage halt and re-queue the halted jobs (scheduled after the commit).

    Args:
        db_url: The ledger.
        schedule: Called as ``schedule(stage, job_id)`` for each re-queued job.

    Returns:
        The halt's reason and the jobs re-queued.
    """
    with session_scope(db_url) as session:
        reason = control.halt_reason(session)
        control.clear_flag(session, control.HALT_KEY)
        halted = list(session.scalars(select(Job).where(Job.state == "halted")))
        for job in halted:
            transition(session, job, to_state="queued", detail="resumed", next_run_at=utcnow())
        ids = [(j.id, j.stage) for j in halted]
    for job_id, stage in ids:
        schedule(stage, job_id)
    return Resumed(reason, ids)


def list_errors(db_url: str, *, include_acked: bool = False) -> list[dict[str, Any]]:
    """The errors ledger, most recent first.

    Args:
        db_url: The ledger.
        include_acked: Also the errors a person has acknowledged.

    Returns:
        One dict per error: ``id``, ``severity``, ``kind``, ``count``, ``last_at`` (ISO
        8601), ``message``, ``acked``.
    """
    with session_scope(db_url) as session:
        q = select(ErrorRecord).order_by(ErrorRecord.last_at.desc())
        if not include_acked:
            q = q.where(ErrorRecord.acked.is_(False))
        return [
            {
                "id": e.id,
                "severity": e.severity,
                "kind": e.kind,
                "count": e.count,
                "last_at": _iso(e.last_at),
                "message": e.message,
                "acked": e.acked,
            }
            for e in session.scalars(q)
        ]


def ack_error(db_url: str, error_id: str) -> None:
    """Acknowledge an error: it leaves the default list until it happens again.

    Args:
        db_url: The ledger.
        error_id: The error's id (``err-…``).

    Raises:
        ErrorNotFound: No error has this id.
    """
    with session_scope(db_url) as session:
        row = session.get(ErrorRecord, error_id)
        if row is None:
            raise ErrorNotFound(error_id)
        row.acked = True


def cost_report(db_url: str, *, by: str, since: timedelta | None) -> dict[str, Any]:
    """What the writer spent, grouped, from a read-only snapshot.

    Args:
        db_url: The ledger.
        by: ``day``, ``transcript``, ``model``, ``outcome``, ``writer`` or ``backend``.
        since: Only rows this recent (``None``: all).

    Returns:
        See :func:`reflect_jobs.ledger.spend.cost_report`.
    """
    with session_scope(db_url, readonly=True) as session:
        return spend.cost_report(session, by=by, since=since)
