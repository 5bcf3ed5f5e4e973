"""reflect-jobs-hook as a process: never fails the session, never loses a capture."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select
from support import BIN, transcripts_dir

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job

HOOK = str(BIN / "reflect-jobs-hook")


def _hook(env, payload, harness="claude"):
    """Run the hook; the timeout is a hang guard (latency is bench/bench_hook.py's job)."""
    raw = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    return subprocess.run(
        [HOOK, harness],
        input=raw if isinstance(raw, bytes) else raw.encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )


def _queued(env) -> int:
    db = env.home / "queue.db"
    if not db.exists():
        return 0
    return sqlite3.connect(db).execute("select count(*) from task").fetchone()[0]


def _spooled(env) -> int:
    d = env.home / "spool"
    return len(list(d.glob("*.json"))) if d.exists() else 0


def _spool_fallbacks(env) -> int:
    """Hooks that could not push in their time budget and left the capture in the spool."""
    log = env.home / "hook-errors.log"
    if not log.exists():
        return 0
    return sum('"CaptureSpooled: ' in line for line in log.read_text().splitlines())


def _jobs(env) -> int:
    with session_scope(env.settings().db_url) as s:
        return s.scalar(select(func.count()).select_from(Job))


def test_claude_payload_enqueues_one_capture_and_prints_nothing(env):
    t = transcripts_dir() / "hello-world-script.jsonl"
    proc = _hook(env, {"session_id": "s1", "transcript_path": str(t), "hook_event_name": "Stop"})
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert _queued(env) == 1


def test_camelcase_copilot_payload(env):
    t = transcripts_dir() / "hello-world-script.jsonl"
    proc = _hook(env, {"sessionId": "c1", "transcriptPath": str(t)}, harness="copilot")
    assert proc.returncode == 0 and _queued(env) == 1


def test_garbage_input_exits_0_logs_and_enqueues_nothing(env):
    cases = [
        b"",
        b"not json",
        b"\x00\xff\xfe garbage",
        b"[1,2]",
        b'{"session_id": "x"}',
        json.dumps({"transcript_path": "/no/such/file.jsonl"}).encode(),
        b'{"transcript_path": 42}',
    ]
    for raw in cases:
        proc = _hook(env, raw)
        assert proc.returncode == 0 and proc.stdout == b"", raw
    assert _queued(env) == 0
    log = (env.home / "hook-errors.log").read_text().splitlines()
    assert len(log) == len(cases)
    assert all("error" in json.loads(line) for line in log)


def test_unknown_harness_is_logged_not_raised(env):
    t = transcripts_dir() / "hello-world-script.jsonl"
    proc = _hook(env, {"session_id": "s", "transcript_path": str(t)}, harness="vim")
    assert proc.returncode == 0 and _queued(env) == 0
    assert "unknown harness" in (env.home / "hook-errors.log").read_text()


def test_child_and_disabled_are_noops(env):
    t = transcripts_dir() / "hello-world-script.jsonl"
    payload = {"session_id": "s", "transcript_path": str(t)}
    for var in ("REFLECT_DRAIN_CHILD", "REFLECT_DISABLED"):
        e = type(env)(env)
        e[var] = "1"
        proc = _hook(e, payload)
        assert proc.returncode == 0
    assert _queued(env) == 0 and not (env.home / "hook-errors.log").exists()


@pytest.mark.chaos
def test_locked_queue_is_logged_and_the_hook_still_exits_0(env):
    t = transcripts_dir() / "hello-world-script.jsonl"
    env.home.mkdir(parents=True)
    (env.home / "queue.db").mkdir()  # a directory where the queue file should be
    proc = _hook(env, {"session_id": "s", "transcript_path": str(t)})
    assert proc.returncode == 0 and proc.stdout == b""
    assert "hook-errors.log" in {p.name for p in env.home.iterdir()}


def test_60_concurrent_hooks_60_jobs_and_20_of_one_session_1_job(env):
    t = transcripts_dir() / "coverage-test-fix.jsonl"
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"  # keep jobs settling: we count captures, not runs
    payloads = [
        {"session_id": f"sess-{i}", "transcript_path": str(t), "hook_event_name": "Stop"}
        for i in range(60)
    ]
    payloads += [
        {"session_id": "one-session", "transcript_path": str(t), "hook_event_name": ev}
        for ev in ("PreCompact", "Stop", "SessionEnd", "Stop") * 5
    ]
    with ThreadPoolExecutor(max_workers=40) as pool:
        results = list(pool.map(lambda p: _hook(env, p).returncode, payloads))
    assert results == [0] * 80
    # Every capture is spooled; each hook either pushed its message or, when the contended
    # queue took longer than its budget, logged that it left the capture in the spool.
    assert _spooled(env) == 80
    assert _queued(env) + _spool_fallbacks(env) == 80
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    assert _jobs(env) == 61
    with session_scope(env.settings().db_url) as s:
        one = s.scalars(select(Job).where(Job.session_id == "one-session")).one()
        assert one.captures == 20 and one.state == "queued"


def test_hook_error_log_rotates_at_1_mib(env):
    env.home.mkdir(parents=True)
    log = env.home / "hook-errors.log"
    log.write_bytes(b"x" * (1 << 20 | 1))
    proc = _hook(env, b"not json")
    assert proc.returncode == 0
    assert (env.home / "hook-errors.log.1").stat().st_size > 1 << 20
    assert log.stat().st_size < 1000 and "not JSON" in log.read_text()
