"""A capture survives everything between the hook and its job row (issue 11.1, 12.5).

The hook writes each capture to ``$REFLECT_HOME/spool/`` before it pushes the queue message,
and the capture stage deletes the entry only after the job row committed, so:

* a real consumer SIGKILLed at ``before_commit:capture`` (the message taken from the SQLite
  queue, which deletes it, and the job row not committed) — the next consumer start makes
  the job;
* a queue that is down (a Redis URL whose server is not running) or locked (a write lock
  held on the SQLite queue by this test) — the hook returns within its budget, the capture
  waits in the spool, and a later consumer makes the job.

Everything is real: hook and consumer processes, SQLite files, redis-server.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from huey import SqliteHuey
from sqlalchemy import select
from support import BIN, free_port, private_redis, wait_for, write_claude_transcript

from reflect_jobs import fastqueue
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job

pytestmark = pytest.mark.chaos

HOOK = str(BIN / "reflect-jobs-hook")


def _hook(env, session_id: str, transcript: Path) -> subprocess.CompletedProcess[bytes]:
    payload = {"session_id": session_id, "transcript_path": str(transcript)}
    return subprocess.run(
        [HOOK, "claude"],
        input=json.dumps({**payload, "hook_event_name": "SessionEnd"}).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,  # a hang guard; the hook's latency is bench/bench_hook.py's job
    )


def _spool(env) -> list[Path]:
    d = env.home / "spool"
    return sorted(d.glob("*.json")) if d.exists() else []


def _queued(env) -> int:
    with sqlite3.connect(env.home / "queue.db") as conn:
        return int(conn.execute("select count(*) from task").fetchone()[0])


def _jobs(env) -> list[tuple[str, int]]:
    with session_scope(env.settings().db_url) as s:
        return [(j.session_id, j.captures) for j in s.scalars(select(Job))]


def _transcript(tmp_path: Path) -> Path:
    return write_claude_transcript(
        tmp_path / "t.jsonl", ["No, never retry a non-idempotent POST blindly."], filler=1
    )


def _make_queue(env) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    SqliteHuey(fastqueue.QUEUE_NAME, filename=str(env.home / "queue.db"), results=False)


def _worker(env, **extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env={**env, **extra},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_sigkill_before_capture_commit_next_consumer_makes_the_job(env, tmp_path: Path):
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"  # the job stays settling: we count captures
    t = _transcript(tmp_path)
    _make_queue(env)
    dying = _worker(env, REFLECT_FAILPOINTS="before_commit:capture")
    try:
        # Ready means past start-up recovery and dequeuing: it has eaten a no-op message.
        fastqueue.enqueue(env.settings().queue_url, "reflect_jobs.tasks.prepare", ("none",))
        wait_for(lambda: _queued(env) == 0, timeout=60, what="the consumer dequeuing")
        assert _hook(env, "killed-1", t).returncode == 0
        assert dying.wait(timeout=60) == -signal.SIGKILL, "the failpoint kills the consumer"
    finally:
        _stop(dying)
    assert _queued(env) == 0, "the consumer took the message (a SQLite dequeue deletes it)"
    assert _jobs(env) == [], "and died before the job row committed"
    assert len(_spool(env)) == 1, "the capture is still in the spool"

    survivor = _worker(env)
    try:
        wait_for(lambda: _jobs(env), timeout=60, what="the next consumer making the job")
        wait_for(lambda: not _spool(env), timeout=30, what="the spool entry deleted")
    finally:
        _stop(survivor)
    assert _jobs(env) == [("killed-1", 1)]


@pytest.mark.services
def test_redis_down_spools_and_a_later_consumer_makes_the_job(env, tmp_path: Path):
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"
    port = free_port()  # nothing listens there yet: the queue is down
    env["REFLECT_QUEUE_URL"] = f"redis://:pw@127.0.0.1:{port}/3"
    t = _transcript(tmp_path)
    proc = _hook(env, "redis-down", t)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert len(_spool(env)) == 1
    (line,) = (env.home / "hook-errors.log").read_text().splitlines()
    error = json.loads(line)["error"]
    assert error.startswith("CaptureSpooled: ") and ":pw@" not in error, error
    assert _jobs(env) == []
    with private_redis(tmp_path / "redis", password="pw", port=port):  # the queue is back
        env.cli("drain", "--until-idle", "--max-seconds", "60")
    assert _jobs(env) == [("redis-down", 1)] and not _spool(env)


def test_locked_sqlite_queue_hook_spools_and_a_later_consumer_makes_the_job(env, tmp_path):
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"
    t = _transcript(tmp_path)
    _make_queue(env)
    lock = sqlite3.connect(env.home / "queue.db", isolation_level=None)
    lock.execute("begin immediate")  # a writer holds the queue (was: a 5 s wait, then lost)
    try:
        proc = _hook(env, "locked", t)
    finally:
        lock.execute("rollback")
        lock.close()
    assert proc.returncode == 0 and proc.stdout == b""
    assert _queued(env) == 0 and len(_spool(env)) == 1
    assert "database is locked" in (env.home / "hook-errors.log").read_text()
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    assert _jobs(env) == [("locked", 1)] and not _spool(env)


def test_spooled_capture_and_its_message_make_one_capture(env, tmp_path):
    """The entry is reconciled at start-up and its message arrives after: counted once."""
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"
    t = _transcript(tmp_path)
    for _ in range(3):
        assert _hook(env, "twice", t).returncode == 0
    assert _queued(env) == 3 and len(_spool(env)) == 3
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    assert _jobs(env) == [("twice", 3)] and not _spool(env) and _queued(env) == 0
