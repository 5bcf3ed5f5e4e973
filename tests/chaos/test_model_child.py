"""A model child never outlives its worker (``children.py``), and is always reaped.

The CLI runs in its own session (so a timeout can kill its whole group), which also meant a
SIGKILLed worker left it running: it finished and billed while the restarted job called
again — and the Codex writer had no guard at all. The stubs (``claude``, ``codex``) log their
pid; the worker is SIGKILLed inside the call (the stub sleeps a minute) and the stub must be
gone long before its minute is up. The next consumer on the same host then takes the dead
worker's job back at once (its owner is provably gone), not after the six-minute lease.

Not tested here: the explicit reap after a second timeout (``_communicate``). CPython's
``Popen.__del__`` already reaps a dead child when the object is dropped, so no observable
zombie was left before that change either; it only stops relying on that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from api_support import STUB_CODEX
from support import BIN, STUB_CLAUDE, running_worker, wait_for, write_claude_transcript

from reflect_jobs.ledger import admin

pytestmark = pytest.mark.chaos


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie (dead; only its exit status is left)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _calls(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_sigkilled_worker_takes_its_model_child_along(env, tmp_path):
    t = write_claude_transcript(tmp_path / "k.jsonl", ["No, always pin the base image digest."])
    env.update(STUB_CLAUDE_MODE="sleep", STUB_CLAUDE_SLEEP="60", REFLECT_DRAIN_TIMEOUT="300")
    env.invoke("enqueue", str(t))
    log = Path(env["STUB_CLAUDE_LOG"])
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid = None
    try:
        pid = wait_for(lambda: [c["pid"] for c in _calls(log)], timeout=90, what="the call")[0]
        assert not _gone(pid)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        # The stub would sleep on for a minute; its worker's death must end it first.
        wait_for(lambda: _gone(pid), timeout=20, what="the model child dying with its worker")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_sigkilled_worker_takes_its_codex_child_along_and_the_next_consumer_reclaims_at_once(
    env, tmp_path
):
    t = write_claude_transcript(tmp_path / "c.jsonl", ["No, never commit the .env file."])
    log = tmp_path / "codex-calls.jsonl"
    env.update(
        REFLECT_WRITER_BACKEND="codex",
        REFLECT_CODEX_BIN=str(STUB_CODEX),
        REFLECT_DRAIN_MODEL="gpt-5-codex",
        STUB_CODEX_MODE="sequence",
        STUB_CODEX_SEQUENCE="sleep,ok",
        STUB_CODEX_STATE=str(tmp_path / "codex-seq"),
        STUB_CODEX_SLEEP="60",
        STUB_CODEX_LOG=str(log),
    )
    assert env.settings().lease_sec == 360, "the default lease: only a reclaim can be quick"
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid = None
    try:
        pid = wait_for(lambda: [c["pid"] for c in _calls(log)], timeout=90, what="the call")[0]
        assert not _gone(pid)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        wait_for(lambda: _gone(pid), timeout=20, what="the codex child dying with its worker")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)
    db = env.settings().db_url
    assert admin.job_detail(db, job_id)["state"] == "running", "killed holding the job"
    started = time.monotonic()
    with running_worker(env):
        wait_for(
            lambda: admin.job_detail(db, job_id)["state"] == "done",
            timeout=60,  # a hang guard far below the lease
            what="the next consumer finishing the dead worker's job",
        )
    took = time.monotonic() - started
    shown = admin.job_detail(db, job_id)
    assert shown["outcome"] == "ok" and shown["recoveries"] == 1 and took < 60
    assert any("is gone" in (e["detail"] or "") for e in shown["events"])
    assert [(c["outcome"], c["entries"]) for c in shown["costs"]] == [
        ("interrupted", 1),
        ("ok", 1),
    ], "the killed call is accounted for (it may have billed), the second one paid once"


WATCHDOG_CALLER = """
import sys
from reflect_jobs.writer.backends import ClaudeCliBackend
ClaudeCliBackend(sys.argv[1], "m", sys.argv[2], 300, guard="watchdog").call("p")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_watchdog_guard_kills_the_child_group_when_its_caller_dies(tmp_path):
    """The macOS path (no parent-death signal), run here: a caller process is SIGKILLed in
    the call; the watchdog sees its pipe close and kills the child's whole group, the
    stub's helper included."""
    log = tmp_path / "calls.jsonl"
    env = dict(
        os.environ,
        STUB_CLAUDE_MODE="sleep",
        STUB_CLAUDE_SLEEP="60",
        STUB_CLAUDE_SPAWN_CHILD="1",
        STUB_CLAUDE_LOG=str(log),
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", WATCHDOG_CALLER, str(STUB_CLAUDE), str(tmp_path)], env=env
    )
    pids: list[int] = []
    try:
        call = wait_for(lambda: _calls(log), timeout=60, what="the call")[0]
        pids = [call["pid"], call["grandchild_pid"]]
        caller.send_signal(signal.SIGKILL)
        caller.wait(10)
        wait_for(lambda: all(_gone(p) for p in pids), timeout=20, what="the child group dying")
    finally:
        for p in pids:
            if not _gone(p):
                os.kill(p, signal.SIGKILL)
