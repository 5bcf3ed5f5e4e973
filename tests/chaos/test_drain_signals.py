"""``drain`` (and ``worker``) stop on SIGINT/SIGTERM and hand their job back (``stopping.py``).

Huey's consumer installs its signal handlers in ``start()`` but only ``Consumer.run()``'s
loop reads what they record; drain runs its own loop, so both signals were ignored and only
SIGKILL stopped it. Then a stopped drain left its job ``running`` for the whole lease and
counted every stop as a crash: the 4th stop poisoned the job after 4 started model calls
with no cost row. Here the drain is signalled while a model call is in flight (the stub
sleeps a minute): it must exit at once, kill the model child, hand the job back (due now,
no recovery counted) and leave an ``interrupted`` cost row for the call it cut short.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import BIN, wait_for, write_claude_transcript

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


def _drain(env, *extra: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--json", *extra],
        env=dict(env, **kw),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop_during_call(env, signum: int, calls_before: int) -> tuple[dict, int]:
    """Start a drain, signal it once its model call runs, return its summary and the stub pid."""
    drain = _drain(env)
    try:
        stub = wait_for(
            lambda: [c["pid"] for c in _calls(env)][calls_before:],
            timeout=90,
            what="the call",
        )[0]
        drain.send_signal(signum)
        # A hang guard, not a timing claim: before the fix the drain never exited.
        out, err = drain.communicate(timeout=30)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    assert drain.returncode == 0, err[-1500:]
    return json.loads(out), stub


def _sleep_then_ok(env, tmp_path, sleeps: int) -> None:
    """The stub's first ``sleeps`` calls hang for a minute, later ones answer; the default
    (six-minute) lease, so nothing here can come back by a lease running out."""
    env.update(
        STUB_CLAUDE_MODE="sequence",
        STUB_CLAUDE_SEQUENCE=",".join(["sleep"] * sleeps + ["ok"]),
        STUB_CLAUDE_STATE=str(tmp_path / "seq"),
        STUB_CLAUDE_SLEEP="60",
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_drain_hands_its_job_back_and_the_next_drain_finishes_it(env, tmp_path, signum):
    t = write_claude_transcript(tmp_path / "s.jsonl", ["No, always pin the base image digest."])
    _sleep_then_ok(env, tmp_path, 1)
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    summary, stub = _stop_during_call(env, signum, 0)
    assert summary["stopped_by"] == signal.Signals(signum).name
    assert summary["counts"] == {"queued": 1}, "the held job is handed back, due now"
    wait_for(lambda: _gone(stub), timeout=20, what="the in-flight model child killed")
    db = env.settings().db_url
    shown = admin.job_detail(db, job_id)
    assert [(c["outcome"], c["entries"]) for c in shown["costs"]] == [("interrupted", 1)], (
        "the cut-short call has its cost row, charged: it may have billed"
    )
    assert shown["recoveries"] == 0, "a stop is not a crash"
    assert any("handed back" in (e["detail"] or "") for e in shown["events"])
    started = time.monotonic()  # no lease to wait out: the next drain takes it at once
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    assert time.monotonic() - started < 30  # hang guard; the figure is in the report
    shown = admin.job_detail(db, job_id)
    assert (shown["state"], shown["outcome"]) == ("done", "ok")
    assert len(_calls(env)) == 2
    assert [(c["outcome"], c["entries"]) for c in shown["costs"]] == [
        ("interrupted", 1),
        ("ok", 1),
    ]


def test_four_stops_leave_no_unaccounted_call_and_do_not_poison_the_job(env, tmp_path):
    """The red-team figure: 4 SIGTERMs inside 4 model calls, then a drain that finishes."""
    t = write_claude_transcript(tmp_path / "f.jsonl", ["No, never log the raw token."])
    _sleep_then_ok(env, tmp_path, 4)
    env["REFLECT_DRAIN_MAX"] = "10"  # five calls in one window; each one is a spent unit
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    for n in range(4):
        summary, _ = _stop_during_call(env, signal.SIGTERM, n)
        assert summary["counts"] == {"queued": 1}, f"stop {n + 1}"
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    db = env.settings().db_url
    shown = admin.job_detail(db, job_id)
    assert (shown["state"], shown["outcome"]) == ("done", "ok"), "never poison_crash_loop"
    assert shown["recoveries"] == 0
    rows = [(c["outcome"], c["entries"]) for c in shown["costs"]]
    assert len(_calls(env)) == 5 == len(rows), "every started call has a cost row"
    assert rows == [("interrupted", 1)] * 4 + [("ok", 1)]
    cost = json.loads(env.invoke("cost", "--json").stdout)["total"]
    assert cost["entries"] == 5, "each call that may have billed is charged to the budget"


def test_an_answer_recorded_before_the_stop_is_reused_not_paid_again(env, tmp_path):
    """Stopped after the paid answer was recorded and before it was applied (failpoint
    ``after_record=pause``): the job is handed back, and the next drain reuses the answer."""
    t = write_claude_transcript(tmp_path / "r.jsonl", ["No, always close the cursor."])
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    drain = _drain(env, REFLECT_FAILPOINTS="after_record=pause", REFLECT_FAILPOINT_DIR=str(pauses))
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    try:
        wait_for(lambda: list(pauses.glob("*.paused")), timeout=90, what="the pause")
        drain.send_signal(signal.SIGTERM)
        out, err = drain.communicate(timeout=30)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    assert drain.returncode == 0, err[-1500:]
    assert json.loads(out)["counts"] == {"queued": 1}
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    shown = admin.job_detail(env.settings().db_url, job_id)
    assert (shown["state"], shown["outcome"]) == ("done", "ok")
    assert len(_calls(env)) == 1, "the recorded answer was reused"
    assert [(c["outcome"], c["entries"]) for c in shown["costs"]] == [("ok", 1)]


@pytest.mark.parametrize("signals", [("SIGINT",), ("SIGTERM", "SIGTERM")])
def test_a_worker_stopped_at_once_hands_its_job_back(env, tmp_path, signals):
    """``worker``: SIGINT, or a second SIGTERM during the graceful stop, ends the call now;
    the job is handed back before the process exits (was: ``running`` until its lease)."""
    t = write_claude_transcript(tmp_path / "w.jsonl", ["No, never retry without a backoff."])
    _sleep_then_ok(env, tmp_path, 1)
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        stub = wait_for(lambda: [c["pid"] for c in _calls(env)], timeout=90, what="the call")[0]
        for name in signals:
            worker.send_signal(getattr(signal, name))
            time.sleep(0.3)  # let Huey's handler see each signal apart
        assert worker.wait(30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    wait_for(lambda: _gone(stub), timeout=20, what="the in-flight model child killed")
    shown = admin.job_detail(env.settings().db_url, job_id)
    assert (shown["state"], shown["recoveries"]) == ("queued", 0)
    assert [(c["outcome"], c["entries"]) for c in shown["costs"]] == [("interrupted", 1)]
