"""A model child never outlives its worker (``writer/backends.py``), and is always reaped.

The CLI runs in its own session (so a timeout can kill its whole group), which also meant a
SIGKILLed worker left it running: it finished and billed while the restarted job called
again. The stub ``claude`` logs its pid; the worker is SIGKILLed inside the call (the stub
sleeps a minute) and the stub must be gone long before its minute is up.

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
from pathlib import Path

import pytest
from support import BIN, STUB_CLAUDE, wait_for, write_claude_transcript

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
    env.cli("enqueue", str(t))
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
