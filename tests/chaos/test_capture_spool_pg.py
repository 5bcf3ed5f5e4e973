"""A capture survives a ledger that is down when its worker takes it (issue 11.1).

The worker dequeues the hook's capture while PostgreSQL is unreachable: the task raises,
Huey schedules the retries the hook's message asked for, and the spool entry stays. When
PostgreSQL is back, the next consumer makes the job. Real hook, real ``huey_consumer``,
a real PostgreSQL database of the test's own.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import uuid

import pytest
import sqlalchemy as sa
from huey import SqliteHuey
from sqlalchemy import select
from support import BIN, free_port, wait_for, write_claude_transcript

from reflect_jobs import fastqueue
from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.models import Job

pytestmark = [pytest.mark.chaos, pytest.mark.services]

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_url():
    name = "rj_spool_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    dispose_all()
    with admin.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


def _queue(env) -> SqliteHuey:
    env.home.mkdir(parents=True, exist_ok=True)
    return SqliteHuey(fastqueue.QUEUE_NAME, filename=str(env.home / "queue.db"), results=False)


def _queued(env) -> int:
    with sqlite3.connect(env.home / "queue.db") as conn:
        return int(conn.execute("select count(*) from task").fetchone()[0])


def test_postgres_down_the_capture_waits_and_is_made_when_it_is_back(env, tmp_path, pg_url):
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"
    t = write_claude_transcript(tmp_path / "t.jsonl", ["No, pin the base image digest."])
    huey = _queue(env)
    down = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/gone"
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env={**env, "REFLECT_DB_URL": down},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        fastqueue.enqueue(env.settings().queue_url, "reflect_jobs.tasks.prepare", ("none",))
        wait_for(lambda: _queued(env) == 0, timeout=60, what="the consumer dequeuing")
        payload = {"session_id": "pg-down", "transcript_path": str(t)}
        hook = subprocess.run(
            [str(BIN / "reflect-jobs-hook"), "claude"],
            input=json.dumps(payload).encode(),
            env=dict(env),
            capture_output=True,
            timeout=30,
        )
        assert hook.returncode == 0
        # The worker took the message, failed on the ledger and scheduled a Huey retry.
        wait_for(
            lambda: _queued(env) == 0 and huey.scheduled_count() == 1,
            timeout=60,
            what="the capture failing on the ledger and being scheduled for a retry",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    (entry,) = (env.home / "spool").glob("*.json")
    assert json.loads(entry.read_text())["session_id"] == "pg-down", "the spool still holds it"

    env["REFLECT_DB_URL"] = pg_url  # the ledger is back
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    with session_scope(pg_url) as s:
        assert [(j.session_id, j.captures) for j in s.scalars(select(Job))] == [("pg-down", 1)]
    assert not list((env.home / "spool").glob("*.json"))
