"""A consumer SIGKILLed while it holds the graph-writer lock (``tasks.reindex_task``).

This suite found that a Huey lock on SQLite (a key in the queue file, no TTL) outlived a
killed holder and stopped reindexing for good under both ``drain`` and ``worker -f``. The
local lock is now an ``flock`` the kernel releases when its holder dies (Redis keeps the
Huey lock, with a TTL). These tests kill a real process inside the real task and show that
every entry point indexes normally afterwards.

How the kill happens: a child interpreter runs the real ``reindex_task`` body with the
failpoint ``reindex:holding_lock`` armed (``reflect_jobs.faults``), so it SIGKILLs itself
inside the lock, just before the repair pass. The storage state it leaves (the lock held,
the pending flag consumed) is what a consumer killed at that instant leaves.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from sqlalchemy import select
from support import running_worker, transcripts_dir, wait_for

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job

pytestmark = pytest.mark.chaos

PENDING_KEY = "kb:reindex-pending"
NOTE_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"

KILL_INSIDE_LOCK = """
from reflect_jobs import tasks
tasks.reindex_task.call_local()
"""


def _kill_holding_graph_lock(env) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILL_INSIDE_LOCK],
        env=dict(env, REFLECT_FAILPOINTS="reindex:holding_lock"),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-800:]
    # The lock is an flock on $REFLECT_HOME/graph-writer.lock: the kernel released it when
    # the holder died, so the next writer can take it at once.
    import fcntl

    with open(env.home / "graph-writer.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _lexical_hits(env, query: str = "pnpm lockfile") -> list[str]:
    out = env.invoke("search", query, "--mode", "lexical", "--json").stdout
    return [hit["id"] for hit in json.loads(out)["results"]]


def _job_done(env) -> bool:
    with session_scope(env.settings().db_url) as s:
        states = set(s.scalars(select(Job.state)))
    return states == {"done"}


def test_stale_graph_lock_never_blocks_jobs_and_manual_reindex_recovers(env) -> None:
    """Jobs finish after the kill, and a manual ``reflect-jobs reindex`` also works."""
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _kill_holding_graph_lock(env)
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    assert (env.kb / "documents" / f"{NOTE_ID}.md").exists()
    env.cli("reindex")
    assert _lexical_hits(env)[:1] == [NOTE_ID]


def test_stale_graph_lock_under_drain_note_gets_indexed(env) -> None:
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _kill_holding_graph_lock(env)
    env.cli("drain", "--until-idle", "--max-seconds", "30")
    assert _lexical_hits(env)[:1] == [NOTE_ID], "the drained note was never indexed"


def test_worker_start_flushes_stale_graph_lock_and_reindexes(env) -> None:
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _kill_holding_graph_lock(env)
    with running_worker(env, 2):
        wait_for(lambda: _job_done(env), timeout=60, what="the worker finishing the job")
        # The dead holder's lock is gone with it: the worker's reindex after the add runs
        # (a lock outliving its holder would block it for good, however long we waited).
        wait_for(lambda: _lexical_hits(env)[:1] == [NOTE_ID], timeout=60, what="the note indexed")
