"""The reindex coalescing protocol with a real Huey storage: no request is ever lost."""

from __future__ import annotations

import fcntl
import subprocess
import sys

from support import wait_for


def _run(env, code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], env=dict(env), capture_output=True, text=True, check=True
    ).stdout.strip()


WRITER = """
from reflect_jobs import tasks
tasks.huey.storage.put_data(tasks.REINDEX_PENDING, b"1")
tasks.reindex_task.call_local()
print(tasks.huey.storage.peek_data(tasks.REINDEX_PENDING) is tasks.EmptyData)
"""


def _lock_is_held(env) -> bool:
    with open(env.home / "graph-writer.lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def test_a_request_made_while_the_writer_runs_is_served_by_the_same_task(env, tmp_path):
    """The writer is paused inside its pass (failpoint ``reindex:holding_lock=pause``) while
    a second real process asks for a reindex, as a committed add does: the same task makes
    exactly one more pass and leaves no request behind."""
    pauses = tmp_path / "failpoints"
    pauses.mkdir()
    paused = pauses / "reindex:holding_lock.paused"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER],
        env=dict(
            env, REFLECT_FAILPOINTS="reindex:holding_lock=pause", REFLECT_FAILPOINT_DIR=str(pauses)
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(paused.exists, timeout=60, what="the writer's first pass")
        assert _lock_is_held(env), "the pass runs inside the graph-writer lock"
        _run(env, "from reflect_jobs import tasks\ntasks.HueyDispatcher().kb_changed()")
        paused.unlink()
        wait_for(paused.exists, timeout=60, what="a second pass serving the request")
        paused.unlink()  # a third pass would pause again and the writer would never exit
        out, _ = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0 and out.strip() == "True", "a request was left behind"
    assert not paused.exists()


def test_a_task_that_finds_the_lock_taken_leaves_the_request_for_the_holder(env):
    code = """
from reflect_jobs import tasks
tasks.huey.storage.put_data(tasks.REINDEX_PENDING, b"1")
with tasks.graph_writer():
    assert tasks.reindex_task.call_local() is None     # locked: returns at once
    owed = tasks.huey.storage.peek_data(tasks.REINDEX_PENDING) is not tasks.EmptyData
tasks.recover_now()                                     # a lost task is re-sent by recovery
print(owed, tasks.huey.pending_count())
"""
    assert _run(env, code) == "True 1"
