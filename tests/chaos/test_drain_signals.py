"""``drain`` stops on SIGINT and SIGTERM (``drain.py:_StopSignals``), leaving held jobs to recovery.

Huey's consumer installs its signal handlers in ``start()`` but only ``Consumer.run()``'s
loop reads what they record; drain runs its own loop, so both signals were ignored and only
SIGKILL stopped it. Here the drain is signalled while a model call is in flight (the stub
sleeps a minute): it must exit at once, kill the model child, and leave the job to recovery.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from support import BIN, hang_first_model_call, lease_expired, wait_for, write_claude_transcript

from reflect_jobs.ledger import admin

pytestmark = pytest.mark.chaos


def _calls(env) -> list[dict]:
    log = Path(env["STUB_CLAUDE_LOG"])
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_drain_stops_on_a_signal_and_leaves_the_job_to_recovery(env, tmp_path, signum):
    t = write_claude_transcript(tmp_path / "s.jsonl", ["No, always pin the base image digest."])
    hang_first_model_call(env, tmp_path, lease_sec=3)
    job_id = env.cli("enqueue", str(t)).stdout.strip()
    drain = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--json"],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stub = wait_for(lambda: [c["pid"] for c in _calls(env)], timeout=90, what="the call")[0]
        drain.send_signal(signum)
        # A hang guard, not a timing claim: before the fix the drain never exited.
        out, err = drain.communicate(timeout=30)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    assert drain.returncode == 0, err[-1500:]
    summary = json.loads(out)
    assert summary["stopped_by"] == signal.Signals(signum).name
    assert summary["counts"] == {"running": 1}, "the held job is left to recovery"
    wait_for(lambda: _gone(stub), timeout=20, what="the in-flight model child killed")
    db = env.settings().db_url
    assert admin.job_detail(db, job_id)["costs"] == [], "the killed call is not an attempt"
    if signum == signal.SIGTERM:  # and recovery finishes it, with one completed call
        wait_for(lambda: lease_expired(db, job_id), timeout=60, what="the lease expiring")
        env.cli("drain", "--until-idle", "--max-seconds", "60")
        (job,) = admin.list_jobs(db)
        assert (job["state"], job["outcome"]) == ("done", "ok")
        assert len(_calls(env)) == 2 and admin.job_detail(db, job_id)["recoveries"] == 1
