"""The ledger gateway (``ledger/gateway.py``): a $0 job's hot path in SQLAlchemy Core keeps
the ledger's semantics — the claim's compare-and-set and owner, the job_events history, the
coalescing of captures — and opens no ORM session at all.

Against a real SQLite ledger file and, with ``-m services``, PostgreSQL; what is checked is what the ledger holds afterwards, read
back through the ORM as ``reflect-jobs show`` reads it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event, select
from sqlalchemy.orm import Session
from support import write_claude_transcript
from watermark_support import InProcess

from reflect_jobs import pipeline
from reflect_jobs.ledger import gateway, owners
from reflect_jobs.ledger.captures import record_capture
from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.models import Job, JobEvent, Transcript, utcnow
from reflect_jobs.ledger.moves import IllegalTransition

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A real SQLite file, and (``-m services``) a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/reflect.db"
        dispose_all()
        return
    name = "rj_gw_" + uuid.uuid4().hex[:8]
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


def _capture(conn, session_id="s1", event="Stop", settle=0, path="/t.jsonl"):
    return record_capture(
        conn,
        harness="claude",
        session_id=session_id,
        transcript_path=path,
        event=event,
        size=10,
        mtime=1.0,
        settle_sec=settle,
    )


def _history(db, job_id):
    with session_scope(db, readonly=True) as s:
        rows = s.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id))
        return [(e.from_state, e.to_state, e.to_stage, e.detail) for e in rows]


def test_a_job_row_has_every_column_of_a_job():
    """Code that reads a job reads a ``Job`` or a ``JobRow`` alike: the same columns."""
    assert set(gateway.COLUMNS) == {c.name for c in Job.__table__.columns}


def test_captures_of_one_session_coalesce_until_it_is_claimed(db):
    with gateway.transaction(db) as conn:
        first = _capture(conn, event="Stop", settle=30)
        again = _capture(conn, event="SessionEnd", settle=30, path="/t2.jsonl")
    assert first.created and not again.created and again.job_id == first.job_id
    assert again.prepare_at >= first.prepare_at
    with session_scope(db, readonly=True) as s:
        job = s.get(Job, first.job_id)
        assert job is not None
        assert (job.captures, job.transcript_path, job.event) == (2, "/t2.jsonl", "SessionEnd")
        assert job.accepting and (job.stage, job.state) == ("prepare", "queued")
    assert [h[3] for h in _history(db, first.job_id)] == [
        "captured (Stop)",
        "coalesced capture (SessionEnd)",
    ]
    # claimed (prepare stops it accepting): the next capture is a new job
    with gateway.transaction(db) as conn:
        job = gateway.claim(
            conn, first.job_id, "prepare", worker="w", lease_sec=60, now=utcnow() + timedelta(1)
        )
        assert job is not None
        job.accepting = False
        gateway.save(conn, job)
    with gateway.transaction(db) as conn:
        third = _capture(conn)
    assert third.created and third.job_id != first.job_id


def test_a_claim_is_a_compare_and_set_with_its_owner_and_event(db):
    with gateway.transaction(db) as conn:
        res = _capture(conn)
    me = owners.me()
    with gateway.transaction(db) as conn:
        job = gateway.claim(conn, res.job_id, "prepare", worker="w1", lease_sec=60)
        assert job is not None and job.state == "running" and not job.dirty
        # the same message delivered twice, or another worker: nothing to take
        assert gateway.claim(conn, res.job_id, "prepare", worker="w2", lease_sec=60) is None
    with gateway.transaction(db) as conn:
        assert gateway.claim(conn, res.job_id, "write", worker="w2", lease_sec=60) is None
        assert gateway.claim(conn, "jnosuchjob", "prepare", worker="w2", lease_sec=60) is None
    with session_scope(db, readonly=True) as s:
        stored = s.get(Job, res.job_id)
        assert stored is not None
        assert (stored.state, stored.lease_owner) == ("running", "w1")
        assert (stored.owner_host, stored.owner_pid, stored.owner_start) == (
            me.host,
            me.pid,
            me.start,
        )
        assert stored.lease_expires_at is not None and stored.lease_expires_at > utcnow()
    assert _history(db, res.job_id)[-1] == ("queued", "running", "prepare", "claimed")


def test_a_job_not_due_or_a_stopping_process_takes_nothing(db):
    with gateway.transaction(db) as conn:
        res = _capture(conn, settle=300)
        assert gateway.claim(conn, res.job_id, "prepare", worker="w", lease_sec=60) is None
        later = utcnow() + timedelta(seconds=301)
        gateway.stop_claiming()
        try:
            assert (
                gateway.claim(conn, res.job_id, "prepare", worker="w", lease_sec=60, now=later)
                is None
            )
        finally:
            gateway.resume_claiming()
        assert gateway.claim(conn, res.job_id, "prepare", worker="w", lease_sec=60, now=later)


def test_a_move_writes_the_job_and_its_event_together(db):
    with gateway.transaction(db) as conn:
        res = _capture(conn)
        job = gateway.claim(conn, res.job_id, "prepare", worker="w", lease_sec=60)
        assert job is not None
        job.signal_hash = "abc"
        job.prepare_stats = {"signal_count": 0}
        gateway.transition(
            conn, job, to_state="done", to_stage="done", outcome="skip_no_signal", worker="w"
        )
        assert not job.dirty
        with pytest.raises(IllegalTransition):
            gateway.transition(conn, job, to_state="running")
    with session_scope(db, readonly=True) as s:
        stored = s.get(Job, res.job_id)
        assert stored is not None
        assert (stored.stage, stored.state, stored.outcome) == ("done", "done", "skip_no_signal")
        assert (stored.signal_hash, stored.prepare_stats) == ("abc", {"signal_count": 0})
        assert stored.lease_owner is None and stored.owner_pid is None
        assert stored.finished_at is not None and not stored.accepting
    assert _history(db, res.job_id)[-1] == ("running", "done", "done", None)


def test_a_failed_transaction_leaves_nothing(db):
    with gateway.transaction(db) as conn:
        res = _capture(conn)
    with pytest.raises(RuntimeError), gateway.transaction(db) as conn:
        assert gateway.claim(conn, res.job_id, "prepare", worker="w", lease_sec=60)
        raise RuntimeError("the worker's step failed inside the claim")
    with session_scope(db, readonly=True) as s:
        stored = s.get(Job, res.job_id)
        assert stored is not None and stored.state == "queued"
    assert len(_history(db, res.job_id)) == 1


def test_a_zero_job_opens_no_orm_session(env, tmp_path, monkeypatch):
    """Capture → prepare → ``done/skip_no_signal`` through the stage runners, with every
    ORM session begun in the process counted: none (the hot path is Core), and the ledger
    holds what the ORM path wrote — the job's history and its transcript's last outcome."""
    run = InProcess(env, tmp_path, monkeypatch)
    run.rt.settings = dataclasses.replace(run.settings, capture_settle_sec=0)
    t = write_claude_transcript(tmp_path / "quiet.jsonl", [], filler=2)
    begun: list[object] = []
    listener = lambda *a: begun.append(a)  # noqa: E731
    event.listen(Session, "after_begin", listener)
    try:
        job_id = pipeline.run_capture(run.rt, "claude", "quiet", str(t), "SessionEnd", 0)
        assert job_id is not None
        pipeline.run_prepare(run.rt, job_id)
    finally:
        event.remove(Session, "after_begin", listener)
    assert begun == []
    job = run.job(job_id)
    assert (job.stage, job.state) == ("done", "done")
    assert job.outcome is not None and job.outcome.startswith("skip_")
    db = run.settings.db_url
    assert [h[1] for h in _history(db, job_id)] == ["queued", "running", "done"]
    with session_scope(db, readonly=True) as s:
        row = s.get(Transcript, str(t))
        assert row is not None and (row.last_job_id, row.last_outcome) == (job_id, job.outcome)


def test_without_returning_the_same_rows_are_written(db, monkeypatch):
    """SQLite before 3.35 has no ``RETURNING``: the capture tells its insert by the row
    count and the claim reads the row it won; the ledger ends the same."""
    with gateway.transaction(db) as conn:
        monkeypatch.setattr(conn.dialect, "insert_returning", False)
        monkeypatch.setattr(conn.dialect, "update_returning", False)
        if conn.dialect.name == "postgresql":
            pytest.skip("psycopg gives no row count for ON CONFLICT DO NOTHING")
        first = _capture(conn)
        again = _capture(conn, event="SessionEnd")
        job = gateway.claim(conn, first.job_id, "prepare", worker="w", lease_sec=60)
    assert first.created and not again.created and again.job_id == first.job_id
    assert job is not None and (job.state, job.lease_owner, job.captures) == ("running", "w", 2)
    assert [h[1] for h in _history(db, first.job_id)] == ["queued", "queued", "running"]
