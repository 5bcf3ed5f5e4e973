"""A consumer SIGKILLed while it holds the graph-writer lock (``tasks.reindex_task``).

This suite found that a Huey lock on SQLite (a key in the queue file, no TTL) outlived a
killed holder and stopped reindexing for good under both ``drain`` and ``worker -f``. The
local lock is now an ``flock`` the kernel releases when its holder dies (Redis keeps the
Huey lock, with a TTL). These tests kill a real process inside the real task and show that
every entry point indexes normally afterwards.

How the kill happens: a child interpreter imports ``reflect_jobs.tasks``, replaces
``maintenance.repair`` — the first thing ``reindex_task`` does once it holds the lock — with
a ``SIGKILL`` to itself, and runs the task body. The storage state it leaves (the lock key
set, the pending flag consumed) is byte for byte what a consumer killed at that instant
leaves.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from support import BIN, transcripts_dir

PENDING_KEY = "kb:reindex-pending"
NOTE_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"

KILL_INSIDE_LOCK = """
import os, signal
from reflect_jobs import tasks

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

tasks.maintenance.repair = die
tasks.reindex_task.call_local()
"""


def _kill_holding_graph_lock(env) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILL_INSIDE_LOCK], env=dict(env), capture_output=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-800:]
    # The lock is an flock on $REFLECT_HOME/graph-writer.lock: the kernel released it when
    # the holder died, so the next writer can take it at once.
    import fcntl

    with open(env.home / "graph-writer.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _lexical_hits(env, query: str = "pnpm lockfile") -> list[str]:
    out = env.cli("search", query, "--mode", "lexical", "--json").stdout
    return [hit["id"] for hit in json.loads(out)]


@contextlib.contextmanager
def _worker(env) -> Iterator[subprocess.Popen[bytes]]:
    """``reflect-jobs worker`` (execs huey_consumer -f), stopped with SIGTERM afterwards."""
    proc = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "2"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


def _job_done(env) -> bool:
    jobs = json.loads(env.cli("jobs", "--json").stdout)
    return bool(jobs) and all(j["state"] == "done" for j in jobs)


def test_stale_graph_lock_never_blocks_jobs_and_manual_reindex_recovers(env) -> None:
    """Jobs finish after the kill, and a manual ``reflect-jobs reindex`` also works."""
    env.cli("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _kill_holding_graph_lock(env)
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.cli("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    assert (env.kb / "documents" / f"{NOTE_ID}.md").exists()
    env.cli("reindex")
    assert _lexical_hits(env)[:1] == [NOTE_ID]


def test_stale_graph_lock_under_drain_note_gets_indexed(env) -> None:
    env.cli("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _kill_holding_graph_lock(env)
    env.cli("drain", "--until-idle", "--max-seconds", "30")
    assert _lexical_hits(env)[:1] == [NOTE_ID], "the drained note was never indexed"


def test_worker_start_flushes_stale_graph_lock_and_reindexes(env) -> None:
    env.cli("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _kill_holding_graph_lock(env)
    with _worker(env):
        assert _wait(lambda: _job_done(env), 30), "the worker did not finish the job"
        # The dead holder's lock is gone with it: the worker reindexes within seconds.
        indexed = _wait(lambda: _lexical_hits(env)[:1] == [NOTE_ID], 6)
    assert indexed, "note not indexed after the worker ran"
