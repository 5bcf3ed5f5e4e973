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
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from reflect_jobs.config import Settings
from reflect_jobs.ledger import captures, control, gateway
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.gateway import JobRow
from reflect_jobs.ledger.jobs import transition, worker_id
from reflect_jobs.ledger.models import Job, utcnow
from reflect_jobs.limits import Caps
from reflect_jobs.sanitize import clean_text
from reflect_jobs.write_lease import WriteLease

if TYPE_CHECKING:  # the outcome tables import the writer; the runtime needs only the type
    from reflect_jobs.writer.outcomes import JobMove

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


@contextlib.contextmanager
def owned_row(rt: Runtime, job_id: str, worker: str) -> Iterator[tuple[Connection, JobRow | None]]:
    """:func:`owned` on the ledger gateway (Core, no ORM session): the $0 hot path's verdict.

    Args:
        rt: The runtime.
        job_id: The job we claimed.
        worker: The lease owner we claimed it as.

    Yields:
        ``(connection, job)``; ``job`` is None when the lease was lost, and the caller must
        then change nothing. Columns set on the job are written when the block ends, and
        the transaction commits then.
    """
    with gateway.transaction(rt.db) as conn:
        job = gateway.load(conn, job_id)
        if job is None or job.state != "running" or job.lease_owner != worker:
            log.warning("lease lost", job_id=job_id, worker=worker)
            yield conn, None
        else:
            yield conn, job
            gateway.save(conn, job)


def _move(ledger: Session | Connection, job: Job | JobRow, **move: Any) -> None:
    """One transition by the executor that fits: the ORM's for a ``Job`` in a ``Session``,
    the gateway's for a ``JobRow`` on a connection (the rules are one: ``ledger/moves.py``)."""
    if isinstance(ledger, Session):
        assert isinstance(job, Job)
        transition(ledger, job, **move)
    else:
        assert isinstance(job, JobRow)
        gateway.transition(ledger, job, **move)


def log_transition(job: Job | JobRow, **extra: Any) -> None:
    """The one structured log line per job transition.

    Args:
        job: The job, already moved.
        **extra: Extra fields (a reason, a retry time).
    """
    log.info(
        "transition", job_id=job.id, stage=job.stage, state=job.state, outcome=job.outcome, **extra
    )


def finish(
    session: Session | Connection,
    job: Job | JobRow,
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
        session: The transaction that commits the transition (ORM, or a gateway connection).
        job: The job (held by ``owned`` or ``held``).
        outcome: The job's final outcome.
        state: ``done``, ``poisoned`` or ``quarantined``.
        detail: The event's detail text.
        worker: The lease owner, recorded on the event.
    """
    _move(
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


def defer(
    session: Session | Connection, job: Job | JobRow, until: datetime, reason: str, worker: str
) -> None:
    """Hold the job until ``until`` (a cap, the quota gate): not a failure, not charged.

    Args:
        session: The transaction that commits the transition.
        job: The job (held by ``owned`` or just claimed).
        until: When it becomes due again.
        reason: Why, for the event and the log.
        worker: The lease owner, recorded on the event.
    """
    _move(session, job, to_state="deferred", next_run_at=until, detail=reason, worker=worker)
    log_transition(job, reason=reason, until=until.isoformat())


def apply_move(
    rt: Runtime,
    session: Session,
    job: Job,
    move: JobMove,
    *,
    outcome: str,
    detail: str | None,
    worker: str,
    retry_after_sec: float = 0.0,
) -> datetime | None:
    """Move a held job as an outcome's :class:`~reflect_jobs.writer.outcomes.JobMove` says.

    The one place that turns a disposition into a transition, for the write stage's
    outcomes and for a stage's exception alike — and the one place that counts a failure:
    ``job.failures`` goes up by one exactly when the move ``counts_failure`` (the outcome
    table's rule, ``writer/outcomes.py``; whether the retries are then exhausted is its
    ``retries_exhausted``). A terminal move goes through :func:`finish`; any other is a
    transition due ``now``, after the :func:`backoff` of the job's failures so far (this
    one included), or after the provider's retry-after (60 s when it gave none, at most
    ``quota_ttl_sec``).

    Args:
        rt: The runtime (backoff base, quota TTL).
        session: The transaction that commits the move.
        job: The job, held by this worker.
        move: The ``JobMove`` of the outcome's disposition.
        outcome: The outcome recorded on the job.
        detail: The event's detail text.
        worker: The lease owner, recorded on the event.
        retry_after_sec: The provider's retry-after, for a ``retry_after`` move.

    Returns:
        When the job is due again (None for a terminal move or one not scheduled).
    """
    if move.counts_failure:
        job.failures += 1
    if move.terminal:
        finish(session, job, outcome=outcome, state=move.state, detail=detail, worker=worker)
        return None
    next_run_at = None
    if move.run_at == "now":
        next_run_at = utcnow()
    elif move.run_at == "backoff":
        next_run_at = utcnow() + backoff(rt, job.failures)
    elif move.run_at == "retry_after":  # a 429/529: free, due when the provider says
        wait = retry_after_sec if retry_after_sec > 0 else 60.0
        next_run_at = utcnow() + timedelta(seconds=min(wait, rt.settings.quota_ttl_sec))
    transition(
        session,
        job,
        to_state=move.state,
        to_stage=move.stage,
        outcome=outcome,
        detail=detail,
        next_run_at=next_run_at,
        worker=worker,
    )
    if move.run_at in ("backoff", "retry_after") and next_run_at is not None:
        log_transition(job, retry_at=next_run_at.isoformat())
    else:
        log_transition(job)
    return next_run_at


def backoff(rt: Runtime, failures: int) -> timedelta:
    """Exponential retry delay: ``retry_base_sec * 2**(failures-1)``.

    Args:
        rt: The runtime (for ``retry_base_sec``).
        failures: Failures so far, this one included.

    Returns:
        How long to wait before the next attempt.
    """
    return timedelta(seconds=rt.settings.retry_base_sec * (2 ** max(failures - 1, 0)))


def remember_transcript(session: Session | Connection, job: Job | JobRow) -> None:
    """Record the transcript's size, mtime and last outcome as of this finished job.

    Args:
        session: The transaction finishing the job.
        job: The finished job.
    """
    captures.remember_transcript(session, job)


def drop_slice(job: Job | JobRow) -> None:
    """Delete the job's private slice file, if it has one (a missing file is fine).

    Args:
        job: The finished job.
    """
    if job.slice_path:
        with contextlib.suppress(OSError):
            os.unlink(job.slice_path)


def transient_error(exc: BaseException) -> bool:
    """Whether ``exc`` may pass by itself (worth a retry), as opposed to a bug or bad input.

    Transient: ``OSError`` (a full disk, a failing device, a dropped connection), SQLAlchemy's
    ``OperationalError``/``InterfaceError``/pool ``TimeoutError`` (a locked or unreachable
    database) and Redis connection errors. Everything else — a ``UnicodeError``, a
    ``RecursionError``, a value PostgreSQL refuses (``DataError``) — fails the same way on
    the same input.

    Args:
        exc: The exception a stage raised.

    Returns:
        True for the transient kinds above.
    """
    from sqlalchemy import exc as sa_exc

    kinds: tuple[type[BaseException], ...] = (
        OSError,
        sa_exc.OperationalError,
        sa_exc.InterfaceError,
        sa_exc.TimeoutError,
    )
    try:
        import redis.exceptions as redis_exc

        kinds += (redis_exc.ConnectionError, redis_exc.TimeoutError)
    except ImportError:  # pragma: no cover - redis is a dependency of the Redis queue only
        pass
    return isinstance(exc, kinds)


def describe_error(exc: BaseException, limit: int = 500) -> str:
    """``"<Type>: <message>"``, storable (no NUL, no lone surrogate) and at most ``limit`` chars.

    Args:
        exc: Any exception.
        limit: The longest text returned.

    Returns:
        The one-line description.
    """
    text = f"{type(exc).__name__}: {exc}"
    return clean_text(" ".join(text.split()))[:limit]


def stage_failed(rt: Runtime, stage: str, job_id: str | None, exc: BaseException) -> str | None:
    """Record a stage's exception and move the job it holds: retry with backoff, or poison.

    The error goes to the errors ledger (``stage_error``, which ``reflect-jobs errors``
    lists), to the job's ``error`` and to its event; the move is
    :func:`reflect_jobs.writer.outcomes.stage_error_outcome`. Only a job this worker still
    holds is moved (a stage that already moved its job, or lost its lease, only reports
    the error). If even this fails (the ledger is down) the lease expiry path remains.

    Args:
        rt: The runtime.
        stage: The stage that raised (``capture`` has no job yet: ``job_id`` None).
        job_id: The job the stage ran for.
        exc: The exception.

    Returns:
        The job's new state, or None when no job was moved.
    """
    from reflect_jobs.writer.outcomes import error_kind, job_move, stage_error_outcome

    worker = rt.who()
    error = describe_error(exc)
    log.error("stage error", job_id=job_id, stage=stage, error=error, exc_info=exc)
    moved: str | None = None
    eta = None
    try:
        with session_scope(rt.db) as session:
            job = session.get(Job, job_id, populate_existing=True) if job_id else None
            held = job is not None and job.state == "running" and job.lease_owner == worker
            outcome = stage_error_outcome(
                stage,
                error,
                transient=transient_error(exc),
                prior_failures=job.failures if job is not None else 0,
                max_retries=rt.settings.max_retries,
            )
            kind, severity = error_kind(outcome.outcome) or ("stage_error", "error")
            control.record_error(
                session,
                kind=kind,
                severity=severity,
                message=f"{stage}: {error}",
                context={"job_id": job_id, "stage": stage, "held": held},
            )
            if job is None or not held:
                return None
            job.error = error
            move = job_move(outcome.disposition)
            eta = apply_move(
                rt,
                session,
                job,
                move,
                outcome=outcome.outcome,
                detail=outcome.detail,
                worker=worker,
            )
            moved = job.state
    except Exception:  # noqa: BLE001 - the lease expiry path still recovers the job
        log.exception("could not record the stage error", job_id=job_id, stage=stage)
        return None
    if moved == "retrying" and job_id is not None:
        rt.dispatcher.schedule(stage, job_id, eta)
    return moved
