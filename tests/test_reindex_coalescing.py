"""The reindex coalescing protocol with a real Huey storage: no request is ever lost."""

from __future__ import annotations

import subprocess
import sys


def _run(env, code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], env=dict(env), capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_request_made_while_the_writer_runs_is_served_by_the_same_task(env):
    code = """
from reflect_jobs import tasks
from reflect_jobs.index import maintenance
calls = []
real = maintenance.reindex
def spy(kb, force=False, **kw):
    calls.append(1)
    if len(calls) == 1:
        tasks.HueyDispatcher().kb_changed()   # an add commits while we are reindexing
    return real(kb, force=force, **kw)
maintenance.reindex = spy
tasks.huey.storage.put_data(tasks.REINDEX_PENDING, b"1")
tasks.reindex_task.call_local()
print(len(calls), tasks.huey.storage.peek_data(tasks.REINDEX_PENDING) is tasks.EmptyData)
"""
    assert _run(env, code) == "2 True"


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
