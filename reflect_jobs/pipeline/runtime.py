"""What every stage runner shares: the runtime, lease ownership and the common transitions.

The stage modules (``capture``, ``prepare``, ``write``, ``add``) differ in their work but
end the same way — a commit that only happens while our lease stands (:func:`owned`), a
terminal :func:`finish` with its bookkeeping, a :func:`defer` or a retry with
:func:`backoff` — so those live here once, with the one log line per transition.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from reflect_jobs.config import Settings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import transition, worker_id
from reflect_jobs.ledger.models import Job, Transcript, utcnow
from reflect_jobs.limits import Caps
from reflect_jobs.write_lease import WriteLease

# One logger name for every stage, as before the split: log consumers filter on it.
log = structlog.get_logger("reflect_jobs.pipeline")


class Dispatcher(Protocol):
    """Where a runner hands the next step (Huey in production, a list in unit tests)."""

    def schedule(self, stage: str, job_id: str, eta: datetime | None = None) -> None:
        """Send the ``stage`` message for ``job_id``, now or at ``eta``.

        Args:
            stage: ``prepare``, ``write`` or ``add``.
            job_id: The job the message is for.
            eta: When the message becomes due; ``None`` means now.
        """
        ...

    def kb_changed(self) -> None:
        """Ask for one (coalesced) reindex: notes changed on disk."""
        ...


@dataclass
class Runtime:
    """Everything a runner needs: settings, the dispatcher, the caps and who we are.

    ``write_lease`` bounds the paid calls in flight across every worker and consumer of the
    queue (:mod:`reflect_jobs.write_lease`); ``None`` means no lease (a single in-process
    runner in a unit test).
    """

    settings: Settings
    dispatcher: Dispatcher
    caps: Caps
    worker: str = ""
    write_lease: WriteLease | None = None

    @property
    def db(self) -> str:
        """The ledger's SQLAlchemy URL."""
        return self.settings.db_url

    def who(self) -> str:
        """This worker's lease-owner id (fixed in tests, per process/thread otherwise).

        Returns:
            :attr:`worker` when set, else :func:`reflect_jobs.ledger.jobs.worker_id`.
        """
        return self.worker or worker_id()


@contextlib.contextmanager
def owned(rt: Runtime, job_id: str, worker: str) -> Iterator[tuple[Session, Job | None]]:
    """A transaction holding ``job_id`` only if our lease on it still stands.

    Args:
        rt: The runtime.
        job_id: The job we claimed.
        worker: The lease owner we claimed it as.

    Yields:
        ``(session, job)``; ``job`` is None when the lease was lost (expired and recovered,
        or the job moved on), and the caller must then change nothing. The session commits
        when the block ends without an exception.
    """
    with session_scope(rt.db) as session:
        job = session.get(Job, job_id, populate_existing=True)
        if job is None or job.state != "running" or job.lease_owner != worker:
            log.warning("lease lost", job_id=job_id, worker=worker)
            yield session, None
        else:
            yield session, job


def log_transition(job: Job, **extra: Any) -> None:
    """The one structured log line per job transition.

    Args:
        job: The job, already moved.
        **extra: Extra fields (a reason, a retry time).
    """
    log.info(
        "transition", job_id=job.id, stage=job.stage, state=job.state, outcome=job.outcome, **extra
    )


def finish(
    session: Session,
    job: Job,
    *,
    outcome: str,
    state: str = "done",
    detail: str | None = None,
    worker: str | None = None,
) -> None:
    """A terminal transition plus the bookkeeping every terminal job gets.

    A ``done`` job also updates its transcript's row (so an unchanged re-capture is skipped
    for free) and loses its slice file.

    Args:
        session: The transaction that commits the transition.
        job: The job (held by ``owned``).
        outcome: The job's final outcome.
        state: ``done``, ``poisoned`` or ``quarantined``.
        detail: The event's detail text.
        worker: The lease owner, recorded on the event.
    """
    transition(
        session,
        job,
        to_state=state,
        to_stage="done" if state == "done" else None,
        outcome=outcome,
        detail=detail,
        worker=worker,
    )
    if state == "done":
        remember_transcript(session, job)
        drop_slice(job)
    log_transition(job, detail=detail)


def defer(session: Session, job: Job, until: datetime, reason: str, worker: str) -> None:
    """Hold the job until ``until`` (a cap, the quota gate): not a failure, not charged.

    Args:
        session: The transaction that commits the transition.
        job: The job (held by ``owned`` or just claimed).
        until: When it becomes due again.
        reason: Why, for the event and the log.
        worker: The lease owner, recorded on the event.
    """
    transition(session, job, to_state="deferred", next_run_at=until, detail=reason, worker=worker)
    log_transition(job, reason=reason, until=until.isoformat())


def backoff(rt: Runtime, failures: int) -> timedelta:
    """Exponential retry delay: ``retry_base_sec * 2**(failures-1)``.

    Args:
        rt: The runtime (for ``retry_base_sec``).
        failures: Failures so far, this one included.

    Returns:
        How long to wait before the next attempt.
    """
    return timedelta(seconds=rt.settings.retry_base_sec * (2 ** max(failures - 1, 0)))


def remember_transcript(session: Session, job: Job) -> None:
    """Record the transcript's size, mtime and last outcome as of this finished job.

    Args:
        session: The transaction finishing the job.
        job: The finished job.
    """
    row = session.get(Transcript, job.transcript_path)
    if row is None:
        row = Transcript(path=job.transcript_path)
        session.add(row)
    row.harness = job.harness
    row.session_id = job.session_id
    row.last_job_id = job.id
    row.last_outcome = job.outcome
    row.size = job.transcript_size
    row.mtime = job.transcript_mtime
    row.updated_at = utcnow()


def drop_slice(job: Job) -> None:
    """Delete the job's private slice file, if it has one (a missing file is fine).

    Args:
        job: The finished job.
    """
    if job.slice_path:
        with contextlib.suppress(OSError):
            os.unlink(job.slice_path)
