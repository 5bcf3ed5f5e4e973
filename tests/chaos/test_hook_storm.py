"""200 concurrent ``reflect-jobs-hook`` processes: no capture lost, no session disturbed.

``tests/test_hook.py`` already covers 60 hooks against one transcript. This is the storm
version (issue 8): 200 real hook processes for 200 distinct sessions, launched by a pool of
50 threads so that dozens of interpreters race on one SQLite queue file that does not exist
yet — the first hooks of a fresh install run before any consumer has created the queue, so
the table creation itself is contended. A hook that cannot get the queue within its time
budget leaves the capture in the spool (and logs that), so every hook must still exit 0 with empty stdout (a
hook that prints can corrupt a harness's hook protocol), every capture must land exactly
once, and a drain must turn them into exactly 200 jobs.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import func, select
from support import BIN, write_claude_transcript

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job

pytestmark = pytest.mark.chaos

HOOKS = 200
POOL = 50
HOOK = str(BIN / "reflect-jobs-hook")


def _queued_messages(queue_db: Path) -> int:
    with sqlite3.connect(queue_db) as conn:
        return int(conn.execute("select count(*) from task").fetchone()[0])


def _run_hook(env: dict[str, str], payload: dict[str, str]) -> tuple[int, bytes, bytes]:
    # The timeout is a hang guard, not a latency claim (bench/bench_hook.py measures that).
    proc = subprocess.run(
        [HOOK, "claude"],
        input=json.dumps(payload).encode(),
        env=env,
        capture_output=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_200_concurrent_hooks_200_captures_200_jobs(env, tmp_path: Path) -> None:
    # Jobs stay settling for an hour: this test counts captures and jobs, not model calls.
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    payloads = [
        {
            "session_id": f"storm-{i:03d}",
            "transcript_path": str(
                write_claude_transcript(
                    sessions / f"s{i:03d}.jsonl", [f"Never commit secrets ({i})."], filler=1
                )
            ),
            "hook_event_name": "Stop",
        }
        for i in range(HOOKS)
    ]
    assert not (env.home / "queue.db").exists(), "the storm must also race on queue creation"

    with ThreadPoolExecutor(max_workers=POOL) as pool:
        results = list(pool.map(lambda p: _run_hook(dict(env), p), payloads))

    codes = [r[0] for r in results]
    assert codes == [0] * HOOKS
    assert all(r[1] == b"" for r in results), "a hook printed something on stdout"
    assert all(r[2] == b"" for r in results), "a hook printed something on stderr"
    # A hook that could not get the contended queue within its time budget left its
    # capture in the spool and said so; nothing else may be logged.
    errors = env.home / "hook-errors.log"
    lines = errors.read_text().splitlines() if errors.exists() else []
    other = [line for line in lines if '"CaptureSpooled: ' not in line]
    assert not other, other[:5]

    assert len(list((env.home / "spool").glob("*.json"))) == HOOKS, "every capture spooled"
    assert _queued_messages(env.home / "queue.db") + len(lines) == HOOKS

    env.cli("drain", "--until-idle", "--max-seconds", "120", timeout=180)
    with session_scope(env.settings().db_url) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == HOOKS
        sessions_seen = set(session.scalars(select(Job.session_id)))
        captures = set(session.scalars(select(Job.captures)))
    assert sessions_seen == {p["session_id"] for p in payloads}
    assert captures == {1}, "each session was captured exactly once"
    assert _queued_messages(env.home / "queue.db") == 0, "every capture message was consumed"
    assert not list((env.home / "spool").glob("*.json")), "every spool entry reconciled"
