"""Values PostgreSQL refuses (a NUL, a string over a VARCHAR) no longer wedge a job.

On SQLite both were stored; on PostgreSQL the capture of a session id holding a NUL raised
inside the capture task (the capture was lost), and a transcript path over 512 characters
failed the add's commit (``learning_sources.source`` is VARCHAR(512)) on every attempt
until the job was poisoned as a crash loop.
"""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa
from support import write_claude_transcript

from reflect_jobs.ledger.db import dispose_all

pytestmark = [pytest.mark.services]

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg(env):
    name = "rj_se_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    env["REFLECT_DB_URL"] = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    yield env
    dispose_all()
    with admin.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


def _jobs(env) -> list[dict]:
    return json.loads(env.invoke("jobs", "--json").stdout)


def _drain(env) -> None:
    env.invoke("drain", "--until-idle", "--max-seconds", "60", timeout=120)


def test_a_transcript_path_over_512_chars_finishes_on_postgresql(pg, tmp_path):
    deep = tmp_path.joinpath(*["d" * 100] * 5)
    deep.mkdir(parents=True)
    t = write_claude_transcript(deep / "t.jsonl", ["No, always pin the base image digest."])
    assert len(str(t)) > 512
    pg.cli("enqueue", str(t))
    _drain(pg)
    (job,) = _jobs(pg)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    assert job["transcript_path"] == str(t), "the job keeps the real path"


def test_a_session_id_with_nul_is_captured_on_postgresql(pg, tmp_path):
    t = write_claude_transcript(tmp_path / "t.jsonl", ["No, always pin the base image digest."])
    payload = {"session_id": "ab\x00cd", "transcript_path": str(t), "hook_event_name": "Stop"}
    pg.run("reflect-jobs-hook", "claude", input=json.dumps(payload))
    _drain(pg)
    (job,) = _jobs(pg)
    assert (job["session_id"], job["state"], job["outcome"]) == ("abcd", "done", "ok"), job
