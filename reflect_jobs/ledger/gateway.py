"""The ledger gateway: a job's hot path in SQLAlchemy Core, not the ORM (issue 22 item 8).

A $0 job (capture → prepare → a free verdict) is three short transactions of a dozen
statements, which SQLite runs in well under a millisecond; through the ORM it cost ~9 ms of
CPU — a ``Session`` per transaction, an identity map, a unit-of-work flush and ~40-column
``Job`` objects built and diffed. Here the same statements go straight to one pooled
connection in one transaction (:func:`transaction`), are built from module-level tables (so
SQLAlchemy's compiled cache hits) and read jobs into a plain :class:`JobRow`.

The semantics are the ledger's, unchanged: a claim is the same compare-and-set (owner host,
pid and start recorded; :func:`claim`), every move writes its ``job_events`` row in the
same transaction (:func:`transition`, whose rules are :mod:`.moves`, shared with the ORM's
:func:`.jobs.transition`), and ``BEGIN IMMEDIATE`` is taken on SQLite exactly as a write
session takes it (the engine's ``begin`` listener, :mod:`.db`). Paths off the hot one (the
person's commands, recovery, the paid stages) keep the ORM; a rare ORM step inside a
gateway transaction runs in :func:`orm`, bound to the same connection.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from ..lifecycle import RUNNABLE_STATES as RUNNABLE
from . import owners
from .db import READONLY, get_engine
from .models import Job, JobEvent, utcnow
from .moves import plan
from .owners import Owner

JOBS = cast(Table, Job.__table__)
EVENTS = cast(Table, JobEvent.__table__)


@dataclass(eq=False)
class JobRow:
    """One ``jobs`` row, read without the ORM; the columns set on it are :attr:`dirty`.

    Every column of :class:`.models.Job` is a field of the same name and type
    (``tests/test_ledger_gateway.py`` checks), so code that reads a job reads either. An
    assignment is remembered and written by :func:`save` (or the next :func:`transition`),
    as the ORM flushes a changed attribute.
    """

    id: str
    harness: str
    session_id: str
    transcript_path: str
    event: str
    captures: int
    transcript_size: int | None
    transcript_mtime: float | None
    stage: str
    state: str
    outcome: str | None
    error: str | None
    attempts: int
    failures: int
    timeouts: int
    invalid_streak: int
    recoveries: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    owner_host: str | None
    owner_pid: int | None
    owner_start: str | None
    next_run_at: datetime | None
    accepting: bool
    deep: bool
    cwd: str | None
    slice_path: str | None
    signal_hash: str | None
    chunk_hashes: list[str] | None
    related_ids: list[str] | None
    prepare_stats: dict[str, Any] | None
    actions: dict[str, Any] | None
    result: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    #: Columns assigned since the row was read or last saved, with their new values.
    dirty: dict[str, Any] = field(default_factory=dict, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a column and remember it for :func:`save`."""
        object.__setattr__(self, name, value)
        if name != "dirty" and "dirty" in self.__dict__:
            self.dirty[name] = value


COLUMNS = tuple(f.name for f in fields(JobRow) if f.name != "dirty")


def _row(mapping: Any) -> JobRow:
    # Built without __init__: 36 tracked assignments per row cost more than the read.
    job = JobRow.__new__(JobRow)
    job.__dict__.update({name: mapping[name] for name in COLUMNS}, dirty={})
    return job


@contextlib.contextmanager
def transaction(url: str, *, readonly: bool = False) -> Iterator[Connection]:
    """One short transaction on one pooled connection: commit on success, else roll back.

    Args:
        url: The ledger's URL (its engine is made, and migrated, on first use).
        readonly: A deferred ``BEGIN`` on SQLite (reads a WAL snapshot, takes no write lock)
            instead of ``BEGIN IMMEDIATE``, as :func:`.db.session_scope` does.

    Yields:
        The connection, inside its transaction.
    """
    engine = get_engine(url)
    with engine.connect() as conn:
        if readonly:
            conn = conn.execution_options(**{READONLY: True})
        with conn.begin():
            yield conn


@contextlib.contextmanager
def orm(conn: Connection) -> Iterator[Session]:
    """An ORM session inside a gateway transaction, for a rare step that needs one.

    Args:
        conn: The gateway transaction's connection.

    Yields:
        A session on that connection and its transaction; flushed when the block ends, so
        its changes commit (or roll back) with the gateway's.
    """
    session = Session(bind=conn, expire_on_commit=False)
    try:
        yield session
        session.flush()
    finally:
        session.close()


def load(conn: Connection, job_id: str) -> JobRow | None:
    """Read one job.

    Args:
        conn: An open connection.
        job_id: The job.

    Returns:
        The row, or None when no such job exists.
    """
    found = conn.execute(_SELECT_JOB, {"job_id": job_id}).mappings().first()
    return None if found is None else _row(found)


_SELECT_JOB = select(JOBS).where(JOBS.c.id == bindparam("job_id"))


def save(conn: Connection, job: JobRow) -> None:
    """Write the columns assigned on ``job`` since it was read (none: nothing is sent).

    Args:
        conn: The transaction's connection.
        job: The row.
    """
    if job.dirty:
        conn.execute(_UPDATE_JOB, {"b_id": job.id, **job.dirty})
        job.dirty.clear()


#: The SET clause comes from the parameters' keys (each set of keys compiles once).
_UPDATE_JOB = update(JOBS).where(JOBS.c.id == bindparam("b_id"))
_INSERT_EVENT = insert(EVENTS)


def transition(
    conn: Connection,
    job: JobRow,
    *,
    to_state: str,
    to_stage: str | None = None,
    outcome: str | None = None,
    detail: str | None = None,
    next_run_at: datetime | None = None,
    worker: str | None = None,
    now: datetime | None = None,
) -> None:
    """Move ``job`` and append its event row, as :func:`.jobs.transition` does for a ``Job``.

    The job's pending columns and the move go in one ``UPDATE``, the event in one
    ``INSERT``, both in the caller's transaction.

    Args:
        conn: The transaction's connection.
        job: The job to move (changed in place).
        to_state: The new state (:data:`.moves.ALLOWED` from the current one).
        to_stage: The new stage, or ``None`` to stay.
        outcome: Stored on the job and the event; ``None`` keeps the job's outcome.
        detail: Free text for the event.
        next_run_at: When the job may run next; ``None`` clears it.
        worker: Who made the move, recorded on the event.
        now: The time to record; defaults to the current UTC time.
    """
    changes, event = plan(
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
    save(conn, job)
    conn.execute(_INSERT_EVENT, event)


_stopping = threading.Event()


def stop_claiming() -> None:
    """This process is stopping: :func:`claim` takes nothing from now on."""
    _stopping.set()


def resume_claiming() -> None:
    """Undo :func:`stop_claiming` (a drain run in-process ends; the process goes on)."""
    _stopping.clear()


def claim(
    conn: Connection,
    job_id: str,
    stage: str,
    *,
    worker: str,
    lease_sec: int,
    now: datetime | None = None,
    owner: Owner | None = None,
) -> JobRow | None:
    """Atomically take ``job_id`` for ``stage`` if it is runnable now; else None.

    A second delivery of the same message, a recovery duplicate or a worker on another
    machine all hit the same conditional UPDATE (``WHERE state = <the state read>``); only
    one sees its row. A process that is stopping (:func:`stop_claiming`) takes nothing, so
    what it hands back is all it held. The ``claimed`` event is written with it.

    Args:
        conn: The transaction's connection (a write transaction).
        job_id: The job to take.
        stage: The stage the caller is about to run; the job must be at it.
        worker: The lease owner to record (:func:`.jobs.worker_id`).
        lease_sec: How long the lease lasts before recovery may take the job back.
        now: The claim time; defaults to the current UTC time.
        owner: The owning process to record; defaults to this one (:func:`.owners.me`).

    Returns:
        The job, now ``running``, as the database holds it; or None when it does not
        exist, is at another stage, is not runnable or due, another worker won, or this
        process is stopping.
    """
    if _stopping.is_set():
        return None
    now = now or utcnow()
    owner = owner or owners.me()
    seen = conn.execute(_SELECT_DUE, {"job_id": job_id}).first()
    if (
        seen is None
        or seen.stage != stage
        or seen.state not in RUNNABLE
        or (seen.next_run_at is not None and seen.next_run_at > now)
    ):
        return None
    cas = {
        "b_id": job_id,
        "b_stage": stage,
        "b_state": seen.state,
        **claim_values(worker, lease_sec, now, owner),
    }
    if conn.dialect.update_returning:
        won = conn.execute(_CAS_RETURNING, cas).mappings().first()
        if won is None:
            return None
        job = _row(won)
    else:  # SQLite before 3.35 has no RETURNING
        if cast("CursorResult[Any]", conn.execute(_CAS, cas)).rowcount != 1:
            return None
        reread = load(conn, job_id)
        assert reread is not None
        job = reread
    conn.execute(
        _INSERT_EVENT,
        {
            "job_id": job_id,
            "at": now,
            "from_stage": stage,
            "to_stage": stage,
            "from_state": seen.state,
            "to_state": "running",
            "outcome": None,
            "detail": "claimed",
            "worker": worker,
        },
    )
    return job


#: The compare-and-set: only the state the claim read is replaced (SET from the parameters).
_CAS = update(JOBS).where(
    JOBS.c.id == bindparam("b_id"),
    JOBS.c.stage == bindparam("b_stage"),
    JOBS.c.state == bindparam("b_state"),
)
_CAS_RETURNING = _CAS.returning(*JOBS.c)
_SELECT_DUE = select(JOBS.c.stage, JOBS.c.state, JOBS.c.next_run_at).where(
    JOBS.c.id == bindparam("job_id")
)


def claim_values(worker: str, lease_sec: int, now: datetime, owner: Owner) -> dict[str, Any]:
    """The columns a claim sets: running, the lease and its owner.

    Args:
        worker: The lease owner.
        lease_sec: The lease's length.
        now: The claim time.
        owner: The owning process.

    Returns:
        Column → value for the compare-and-set ``UPDATE``.
    """
    return {
        "state": "running",
        "lease_owner": worker,
        "lease_expires_at": now + timedelta(seconds=lease_sec),
        "owner_host": owner.host[:255],
        "owner_pid": owner.pid,
        "owner_start": owner.start[:160],
        "updated_at": now,
    }
