"""The job state machine for ORM callers (ARCHITECTURE §3): recovery, hand-back, retry.

Every change goes through :func:`transition`, which writes the ``job_events`` row in the same
transaction; the rules are :mod:`.moves`, shared with the ledger gateway's
:func:`.gateway.transition` (the $0 hot path, in Core). Claims are compare-and-set UPDATEs
(``WHERE state = <the state read>``; :func:`.gateway.claim`, which :func:`claim` wraps), so
two workers — threads, processes or machines — can race for a job and exactly one wins, on
SQLite and on PostgreSQL alike, without relying on Huey's delivery guarantees.

A claim records its owner (host, pid, process start; :mod:`.owners`). Recovery takes a
``running`` job back when its lease expired, or at once when its owner on this machine is
proven gone; a consumer stopping on a signal hands its jobs back itself (:func:`hand_back`),
which is not a crash and counts no recovery.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from ..lifecycle import JOB_STATES as STATES
from ..lifecycle import NEEDS_PERSON_STATES as NEEDS_PERSON
from ..lifecycle import RUNNABLE_STATES as RUNNABLE
from . import costs, gateway, owners
from .db import rows_affected
from .gateway import resume_claiming, stop_claiming
from .models import Job, JobEvent, utcnow
from .moves import ALLOWED, IllegalTransition, plan
from .owners import Owner

__all__ = ["ALLOWED", "STATES", "IllegalTransition", "resume_claiming", "stop_claiming"]


def worker_id() -> str:
    """host:pid:thread — unique per worker thread, readable in ``show``.

    Returns:
        ``"<hostname>:<pid>:<thread ident mod 100000>"`` for the calling thread.
    """
    import threading

    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident() % 100000}"


def new_job_id() -> str:
    """A fresh random job id.

    Returns:
        ``"j"`` and 15 hex digits of a UUID4 (16 characters).
    """
    return "j" + uuid.uuid4().hex[:15]


def transition(
    session: Session,
    job: Job,
    *,
    to_state: str,
    to_stage: str | None = None,
    outcome: str | None = None,
    detail: str | None = None,
    next_run_at: datetime | None = None,
    worker: str | None = None,
    now: datetime | None = None,
) -> JobEvent:
    """Move ``job`` and append its event row; the caller's transaction commits both.

    Leaving ``running`` drops the lease; a terminal state stamps ``finished_at`` and stops
    the job accepting captures.

    Args:
        session: The open session that loaded ``job``; the event is added to it.
        job: The job to move (changed in place).
        to_state: The new state; must be allowed from the current one by :data:`ALLOWED`.
        to_stage: The new stage, or ``None`` to stay at the current one.
        outcome: Stored on the job and the event; ``None`` keeps the job's outcome.
        detail: Free text for the event (cut to 4000 characters).
        next_run_at: When the job may run next; ``None`` clears it (runnable now).
        worker: Who made the move, recorded on the event.
        now: The time to record; defaults to the current UTC time.

    Returns:
        The new, not yet flushed, event row.

    Raises:
        IllegalTransition: The state or stage is unknown, or the move is not allowed.
    """
    changes, values = plan(
        job,
        to_state=to_state,
        to_stage=to_stage,
        outcome=outcome,
        detail=detail,
        next_run_at=next_run_at,
        worker=worker,
        now=now or utcnow(),
    )
    for name, value in changes.items():
        setattr(job, name, value)
    event = JobEvent(**values)
    session.add(event)
    return event


def claim(
    session: Session,
    job_id: str,
    stage: str,
    *,
    worker: str,
    lease_sec: int,
    now: datetime | None = None,
    owner: Owner | None = None,
) -> Job | None:
    """Atomically take ``job_id`` for ``stage`` if it is runnable now; else None.

    A second delivery of the same Huey message, a recovery duplicate or a worker on another
    machine all hit the same conditional UPDATE; only one sees rowcount 1. That is what
    makes every stage task idempotent at the door. A process that is stopping
    (:func:`stop_claiming`) takes nothing, so what it hands back is all it held.

    Args:
        session: An open write session; the compare-and-set and its ``claimed`` event run
            on its connection (:func:`.gateway.claim`, the one claim), then the job is read.
        job_id: The job to take.
        stage: The stage the caller is about to run; the job must be at it.
        worker: The lease owner to record (see :func:`worker_id`).
        lease_sec: How long the lease lasts before recovery may take the job back.
        now: The claim time; defaults to the current UTC time.
        owner: The owning process to record; defaults to this one (:func:`owners.me`).

    Returns:
        The job, now ``running`` and refreshed from the database, or ``None`` when it does
        not exist, is at another stage, is not runnable, is not due yet, another worker
        won the claim, or this process is stopping.
    """
    session.flush()  # a job added to this session but not yet flushed is claimable
    won = gateway.claim(
        session.connection(),
        job_id,
        stage,
        worker=worker,
        lease_sec=lease_sec,
        now=now,
        owner=owner,
    )
    if won is None:
        return None
    return session.get(Job, job_id, populate_existing=True)


def extend_lease(session: Session, job_id: str, worker: str, lease_sec: int) -> bool:
    """Keep a long stage's lease alive; False if someone else took the job meanwhile.

    Args:
        session: An open write session.
        job_id: The running job.
        worker: The lease owner that claimed it.
        lease_sec: The new lease length, counted from now.

    Returns:
        ``True`` when the lease was extended; ``False`` when the job is no longer
        ``running`` under ``worker``.
    """
    now = utcnow()
    matched = rows_affected(
        session,
        update(Job)
        .where(Job.id == job_id, Job.state == "running", Job.lease_owner == worker)
        .values(lease_expires_at=now + timedelta(seconds=lease_sec), updated_at=now)
        .execution_options(synchronize_session=False),
    )
    return matched == 1


@dataclass(frozen=True)
class Recovered:
    """One job :func:`recover_expired` took back.

    Attributes:
        job_id: The job.
        stage: Its stage (it is re-queued at it).
        poisoned: It had crashed its worker too often (``poison_crash_loop``).
        owner_gone: Taken back because its owner on this machine is proven gone, not
            because its lease expired.
    """

    job_id: str
    stage: str
    poisoned: bool
    owner_gone: bool = False


def _owner_of(job: Job) -> Owner | None:
    if job.owner_host is None or job.owner_pid is None:
        return None
    return Owner(job.owner_host, job.owner_pid, job.owner_start or "")


def recover_expired(
    session: Session,
    *,
    max_recoveries: int,
    now: datetime | None = None,
    here: Owner | None = None,
) -> list[Recovered]:
    """Re-queue ``running`` jobs whose worker died: at once when it is proven, else at lease end.

    Two rules (ARCHITECTURE §3.2). A job whose owner ran on *this* machine and is proven
    gone (:func:`owners.alive` is False: no such pid, a zombie, or the pid reused by a
    process that started at another time) is taken back now, whatever its lease says — so a
    clock moved backwards cannot keep it. Any other job (another host's, or one whose owner
    cannot be checked) is taken back only when its lease has expired; a live owner on this
    machine keeps the lease rule too (a hung worker). A job that keeps killing its worker is
    poisoned after ``max_recoveries`` so one bad transcript cannot crash-loop the consumer.
    A cost row left ``calling`` by the dead worker is settled as ``interrupted``.

    Args:
        session: An open write session.
        max_recoveries: How many recoveries a job may have; one more poisons it
            (``poison_crash_loop``).
        now: The time leases are compared with; defaults to the current UTC time.
        here: This machine's identity (default :func:`owners.me`; tests pass another).

    Returns:
        One entry per job taken back, re-queued to run now or poisoned. Jobs another
        consumer recovered first are left out.
    """
    now = now or utcnow()
    here = here or owners.me()
    out: list[Recovered] = []
    candidates = session.scalars(
        select(Job).where(
            Job.state == "running",
            or_(Job.lease_expires_at < now, Job.owner_host == here.host),
        )
    ).all()
    for job in candidates:
        owner = _owner_of(job)
        gone = owner is not None and owners.alive(owner, here=here) is False
        expired = job.lease_expires_at is not None and job.lease_expires_at < now
        if not gone and not expired:
            continue
        # Re-check under our own compare-and-set: another consumer may be recovering too,
        # and the job may have moved on and been claimed again since we read it.
        still = update(Job).where(Job.id == job.id, Job.state == "running")
        if gone:
            still = still.where(
                Job.owner_host == job.owner_host,
                Job.owner_pid == job.owner_pid,
                Job.owner_start == job.owner_start,
            )
        else:
            still = still.where(Job.lease_expires_at < now)
        taken = rows_affected(
            session, still.values(updated_at=now).execution_options(synchronize_session=False)
        )
        if taken != 1:
            continue
        session.refresh(job)
        job.recoveries += 1
        costs.settle_interrupted(session, [job.id])
        why = (
            f"owner {owner} is gone (pid ended or reused)"
            if gone
            else f"lease of {job.lease_owner} expired"
        )
        if job.recoveries > max_recoveries:
            transition(
                session,
                job,
                to_state="poisoned",
                outcome="poison_crash_loop",
                detail=f"worker died {job.recoveries} times in stage {job.stage} ({why})",
                now=now,
            )
            out.append(Recovered(job.id, job.stage, True, gone))
        else:
            transition(
                session,
                job,
                to_state="queued",
                detail=f"{why}; recovery {job.recoveries}",
                next_run_at=now,
                now=now,
            )
            out.append(Recovered(job.id, job.stage, False, gone))
    return out


def hand_back(
    session: Session, owner: Owner, *, reason: str, now: datetime | None = None
) -> list[tuple[str, str]]:
    """Give back every job ``owner`` holds: a stopping consumer does this before it exits.

    A stop is not a crash: ``recoveries`` and ``failures`` stay as they were, so stopping a
    drain over and over never poisons a job. The job is due again at once at its stage; a
    paid answer it recorded is reused by the next attempt (never paid again), and a model
    call cut short leaves a cost row settled as ``interrupted`` (charged: it may have billed).

    Args:
        session: An open write session.
        owner: The stopping process (:func:`owners.me`).
        reason: Why, for the event (e.g. ``stopping on SIGTERM``).
        now: The time to record; defaults to the current UTC time.

    Returns:
        ``(job id, stage)`` of every job handed back.
    """
    now = now or utcnow()
    held = session.scalars(
        select(Job).where(
            Job.state == "running",
            Job.owner_host == owner.host,
            Job.owner_pid == owner.pid,
            Job.owner_start == owner.start,
        )
    ).all()
    out = []
    for job in held:
        # Compare-and-set, as recovery does: one of our threads may move it meanwhile.
        still = rows_affected(
            session,
            update(Job)
            .where(
                Job.id == job.id,
                Job.state == "running",
                Job.owner_host == owner.host,
                Job.owner_pid == owner.pid,
                Job.owner_start == owner.start,
            )
            .values(updated_at=now)
            .execution_options(synchronize_session=False),
        )
        if still != 1:
            continue
        session.refresh(job)
        costs.settle_interrupted(session, [job.id])
        transition(
            session,
            job,
            to_state="queued",
            detail=f"handed back by {owner}: {reason}",
            next_run_at=now,
            worker=job.lease_owner,
            now=now,
        )
        out.append((job.id, job.stage))
    return out


def due_jobs(session: Session, *, now: datetime | None = None, limit: int = 500) -> list[Job]:
    """Runnable jobs whose time has come: recovery re-sends their Huey message.

    Huey's SQLite dequeue deletes the message, so a message can be lost with a killed
    worker; the ledger is the truth and re-sending is harmless (claims are idempotent).

    Args:
        session: An open ledger session.
        now: The cut-off for ``next_run_at``; defaults to the current UTC time.
        limit: At most this many jobs.

    Returns:
        Runnable jobs not at stage ``done`` whose ``next_run_at`` is unset or passed,
        ordered by ``next_run_at``.
    """
    now = now or utcnow()
    return list(
        session.scalars(
            select(Job)
            .where(
                Job.state.in_(RUNNABLE),
                Job.stage != "done",
                or_(Job.next_run_at.is_(None), Job.next_run_at <= now),
            )
            .order_by(Job.next_run_at)
            .limit(limit)
        ).all()
    )


def retry_job(session: Session, job: Job, *, worker: str = "cli") -> str:
    """A person's ``retry``: a poisoned/quarantined/halted job goes back to its stage.

    Failure counters restart (B15: no counter follows a transcript forever); the stage
    is kept, so a job poisoned at write retries the write on its stored slice — unless the
    slice is gone, in which case it starts again at prepare.

    Args:
        session: The open session that loaded ``job``.
        job: A poisoned, quarantined or halted job (changed in place).
        worker: Who asked, recorded on the event.

    Returns:
        The stage the job was queued at (``prepare`` instead of ``done``/``capture``, or of
        ``write`` without a slice on disk).

    Raises:
        IllegalTransition: The job is not in a state a person can retry.
    """
    if job.state not in NEEDS_PERSON:
        raise IllegalTransition(
            f"job {job.id} is {job.state}; only poisoned, quarantined or halted jobs can be retried"
        )
    stage = job.stage
    if stage == "write" and (not job.slice_path or not os.path.exists(job.slice_path)):
        stage = "prepare"
    if stage in ("done", "capture"):
        stage = "prepare"
    job.failures = 0
    job.timeouts = 0
    job.invalid_streak = 0
    job.recoveries = 0
    job.error = None
    job.finished_at = None
    transition(
        session,
        job,
        to_state="queued",
        to_stage=stage,
        detail=f"retried by {worker}",
        next_run_at=utcnow(),
    )
    return stage
