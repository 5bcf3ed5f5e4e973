"""Scale-out: the same code on Redis (queue, caps, locks) and PostgreSQL (ledger).

Two consumers run as separate processes — think two machines — against one Redis and
one PostgreSQL (the servers on 127.0.0.1 that the test machines run). Each test gets its
own PostgreSQL database and its own Redis logical database, flushed first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import func, or_, select
from support import BIN, flushable_redis_db, wait_for, write_claude_transcript

from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.models import CostRow, Job, JobEvent, Learning, utcnow

pytestmark = [pytest.mark.services, pytest.mark.slow]

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# Flushed at each test's start: a database of this worker's own (support.flushable_redis_db).
REDIS_DB = flushable_redis_db()


@pytest.fixture
def shared(env):
    import redis

    name = "rj_so_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}").flushdb()
    env.update(
        REFLECT_DB_URL=f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
        REFLECT_QUEUE_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
    )
    yield env
    dispose_all()
    with admin.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


def _calls(env) -> int:
    p = Path(env["STUB_CLAUDE_LOG"])
    return len(p.read_text().splitlines()) if p.exists() else 0


def _claims_by(db_url: str, pid: int) -> list:
    """When the consumer process ``pid`` claimed jobs, from ``job_events``: the ``worker``
    column is ``host:pid:thread`` and a claim is the move into ``running``."""
    with session_scope(db_url) as s:
        rows = s.execute(
            select(JobEvent.worker, JobEvent.at).where(JobEvent.to_state == "running")
        ).all()
    return sorted(at for worker, at in rows if worker and worker.rsplit(":", 2)[1] == str(pid))


def _hook(env, session_id: str, path: Path) -> int:
    payload = json.dumps(
        {"session_id": session_id, "transcript_path": str(path), "hook_event_name": "Stop"}
    )
    return subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=payload.encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    ).returncode


def test_status_and_doctor_name_the_stores_without_passwords(shared):
    data = json.loads(shared.cli("status", "--json").stdout)
    assert data["stores"]["db"].startswith("postgresql+psycopg://postgres@127.0.0.1:5432/rj_so_")
    assert data["stores"]["queue"] == f"redis://127.0.0.1:6379/{REDIS_DB}"
    out = shared.cli("doctor", check=False).stdout
    assert "postgresql" in out and "redis://" in out


def test_pipeline_runs_end_to_end_on_redis_and_postgres(shared, tmp_path):
    t = write_claude_transcript(
        tmp_path / "a.jsonl", ["No, never use SELECT * in the reporting queries."]
    )
    assert _hook(shared, "pg-1", t) == 0
    shared.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(shared.cli("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    assert json.loads(shared.cli("status", "--json").stdout)["budget"]["used"] == 1


@pytest.mark.chaos  # SIGKILLs one of the consumers
def test_two_consumers_40_jobs_cap_10_one_killed_mid_call(shared, tmp_path):
    shared.update(
        REFLECT_DRAIN_DAILY_MAX="10",
        REFLECT_DRAIN_MAX="1000",
        REFLECT_LEASE_SEC="5",
        REFLECT_DRAIN_TIMEOUT="120",
    )
    paths = [
        write_claude_transcript(
            tmp_path / f"s{i}.jsonl",
            [f"No, wrong: never retry payment {i} without an idempotency key."],
        )
        for i in range(40)
    ]
    with ThreadPoolExecutor(max_workers=20) as pool:
        assert (
            list(pool.map(lambda ip: _hook(shared, f"so-{ip[0]}", ip[1]), enumerate(paths)))
            == [0] * 40
        )
    # Consumer A: its model calls hang, and it is killed with SIGKILL in the middle of them.
    a_env = dict(shared, STUB_CLAUDE_MODE="sleep", STUB_CLAUDE_SLEEP="60")
    a = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "2"],
        env=a_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    db_url = shared.settings().db_url
    b = None
    try:
        wait_for(lambda: _calls(shared) >= 1, timeout=90, what="consumer A's first model call")
        b = subprocess.Popen(
            [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "150", "-w", "3"],
            env=dict(shared),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # The race is real only if B claims work while A is alive: wait for it in the ledger.
        wait_for(lambda: _claims_by(db_url, b.pid), timeout=90, what="consumer B's first claim")
        assert a.poll() is None, "consumer A died on its own before the kill"
    finally:
        killed_at = utcnow()
        os.killpg(a.pid, signal.SIGKILL)
        a.wait(10)
    assert b is not None and b.wait(200) == 0, b.stderr.read()
    a_claims, b_claims = _claims_by(db_url, a.pid), _claims_by(db_url, b.pid)
    assert a_claims and b_claims, "both consumers claimed jobs"
    assert max(a_claims) < killed_at  # A's own claims: the two clocks read alike
    assert min(b_claims) < killed_at, "B claimed a job while A was still alive"
    killed_calls = sum(
        1
        for line in Path(shared["STUB_CLAUDE_LOG"]).read_text().splitlines()
        if json.loads(line)["mode"] == "sleep"
    )
    assert killed_calls >= 1
    assert _calls(shared) == 10, "exactly the daily cap of model calls, across both consumers"
    settings = shared.settings()
    with session_scope(settings.db_url) as s:
        states = dict(s.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        assert set(states) <= {"done", "deferred", "poisoned", "quarantined"}, states
        assert sum(states.values()) == 40, "no job lost"
        ok = s.scalar(select(func.count()).select_from(Job).where(Job.outcome == "ok"))
        assert ok == 10 - killed_calls
        rows = s.scalars(select(CostRow).where(CostRow.outcome == "ok")).all()
        assert len(rows) == ok and len({r.job_id for r in rows}) == ok, "no job paid twice"
        (learning,) = s.scalars(select(Learning)).all()
        assert learning.proof_count == ok, (
            "one learning, one proof per source: nothing written twice"
        )
        recovered = s.scalars(  # A's own host proves it gone at once; else its lease expires
            select(JobEvent.job_id).where(
                or_(
                    JobEvent.detail.like("lease of % expired%"),
                    JobEvent.detail.like("owner % is gone%"),
                )
            )
        ).all()
        assert len(recovered) >= killed_calls
    status = json.loads(shared.cli("status", "--json").stdout)
    assert status["budget"]["used"] == 10 and status["counts"]["deferred"] >= 40 - 10 - 1
