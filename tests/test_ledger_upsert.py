"""The ledger's one-statement upserts (``ledger/upsert.py``) keep what the read-then-write did.

A session's checkpoint row: the first verdict inserts it, later ones overwrite it and add up
``passes``; a transcript's row: the last finished job's outcome, size and mtime. On a real
SQLite file and, when it runs, on PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from reflect_jobs.checkpoints import PassPlan
from reflect_jobs.ledger import checkpoints
from reflect_jobs.ledger.captures import remember_transcript
from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.models import Job, SessionCheckpoint, Transcript, transcript_key, utcnow

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _pg() -> Iterator[str]:
    name = "rj_up_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.exec_driver_sql(f"CREATE DATABASE {name}")
    except sa.exc.OperationalError:
        admin.dispose()
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        dispose_all()
        with admin.connect() as c:
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/reflect.db"
        dispose_all()
    else:
        yield from _pg()


def _plan(make_pass: bool, kind: str, level: int, fill: float) -> PassPlan:
    return PassPlan(make_pass, kind, level or None, fill, "m" if make_pass else "", level, "why")


def test_checkpoint_rows_are_inserted_then_overwritten_and_passes_add_up(db: str) -> None:
    t0 = utcnow()
    with session_scope(db) as s:
        checkpoints.record(
            s,
            harness="claude",
            session_id="s1",
            transcript_path="/t/a.jsonl",
            plan=_plan(True, "checkpoint", 40, 41.5),
            idle_sec=600,
            now=t0,
        )
    with session_scope(db) as s:
        row = s.get(SessionCheckpoint, ("claude", "s1"))
        assert row is not None
        assert (row.level, row.fill_pct, row.passes) == (40, 41.5, 1)
        assert row.idle_due_at == t0 + timedelta(seconds=600)
        # Loaded in this session, then upserted: the session sees the new row, not its copy.
        checkpoints.record(
            s,
            harness="claude",
            session_id="s1",
            transcript_path="/t/b.jsonl",
            plan=_plan(True, "deep", 70, 72.0),
            idle_sec=600,
        )
        after = s.get(SessionCheckpoint, ("claude", "s1"))
        assert after is row and row.idle_due_at is None
        assert (row.level, row.passes, row.transcript_path) == (70, 2, "/t/b.jsonl")
    with session_scope(db) as s:
        checkpoints.record(
            s,
            harness="claude",
            session_id="s1",
            transcript_path="/t/b.jsonl",
            plan=_plan(False, "none", 70, 73.0),
            idle_sec=60,
        )
    with session_scope(db) as s:
        row = s.get(SessionCheckpoint, ("claude", "s1"))
        assert row is not None and (row.passes, row.fill_pct) == (2, 73.0)
        assert row.idle_due_at is not None
        assert s.scalar(sa.select(sa.func.count()).select_from(SessionCheckpoint)) == 1


def test_a_transcript_row_holds_the_last_finished_job(db: str) -> None:
    def job(jid: str, outcome: str, size: int) -> Job:
        return Job(
            id=jid,
            harness="claude",
            session_id="s1",
            transcript_path="/t/a.jsonl",
            transcript_size=size,
            transcript_mtime=1.5,
            outcome=outcome,
        )

    with session_scope(db) as s:
        remember_transcript(s, job("j1", "skip_no_signal", 10))
    with session_scope(db) as s:
        remember_transcript(s, job("j2", "ok", 20))
    with session_scope(db) as s:
        (row,) = s.scalars(sa.select(Transcript)).all()
        assert row.path == transcript_key("/t/a.jsonl")
        assert (row.last_job_id, row.last_outcome, row.size, row.mtime) == ("j2", "ok", 20, 1.5)
