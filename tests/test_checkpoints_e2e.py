"""Checkpoints through the real hook and a real consumer: the idle deep pass of a session that
never ended, and one pass per session at a time (ARCHITECTURE §14.1)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from sqlalchemy import select
from support import BIN, wait_for
from watermark_support import CORRECTIONS, GrowingSession, slice_body

from reflect_jobs.checkpoints import BELOW_CHECKPOINT
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, JobEvent, SessionCheckpoint


def _hook(env, path: Path, event: str, session: str = "s-grow") -> None:  # type: ignore[no-untyped-def]
    payload = {"session_id": session, "transcript_path": str(path), "hook_event_name": event}
    proc = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr


def _calls(env) -> list[dict]:  # type: ignore[no-untyped-def]
    log = Path(env["STUB_CLAUDE_LOG"])
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _models(env) -> list[str]:  # type: ignore[no-untyped-def]
    return [c["argv"][c["argv"].index("--model") + 1] for c in _calls(env)]


def _jobs(env) -> list[tuple[str, str | None, bool, str]]:  # type: ignore[no-untyped-def]
    with session_scope(env.settings().db_url) as s:
        rows = s.scalars(select(Job).order_by(Job.created_at)).all()
        return [(j.event, j.outcome, j.deep, j.state) for j in rows]


def test_a_session_that_never_ends_gets_its_deep_pass_when_idle(env, tmp_path):
    env.pop("REFLECT_CHECKPOINTS")
    env.update(REFLECT_SESSION_IDLE_SEC="1", REFLECT_DEEP_MODEL="opus")
    s = GrowingSession(tmp_path / "s-grow.jsonl")
    s.turn(0, CORRECTIONS[0], tokens=10_000)  # 5%: a Stop crosses nothing
    _hook(env, s.path, "Stop")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _jobs(env) == [("Stop", BELOW_CHECKPOINT, False, "done")] and _calls(env) == []
    with session_scope(env.settings().db_url) as db:
        row = db.get(SessionCheckpoint, ("claude", "s-grow"))
        assert row is not None and row.idle_due_at is not None and row.passes == 0
        due = row.idle_due_at.isoformat()[:19]
    sessions = json.loads(env.invoke("status", "--json").stdout)["sessions"]
    assert (sessions["checkpoints"], sessions["tracked"], sessions["idle_owed"]) == (
        "20,40,60,80",
        1,
        1,
    )
    assert sessions["next_idle_at"].startswith(due)
    assert "1 owed an idle deep pass" in env.invoke("status").stdout

    time.sleep(1.2)  # the session went silent (a crash, a closed terminal): no SessionEnd
    env.invoke("drain", "--until-idle", "--max-seconds", "60")  # recovery sweeps idle sessions
    jobs = _jobs(env)
    assert jobs[-1] == ("idle", "ok", True, "done") and len(jobs) == 2
    assert _models(env) == ["opus"]
    with session_scope(env.settings().db_url) as db:
        row = db.get(SessionCheckpoint, ("claude", "s-grow"))
        assert row is not None and row.idle_due_at is None and row.passes == 1

    env.invoke("drain", "--until-idle", "--max-seconds", "60")  # owed once, paid once
    assert len(_jobs(env)) == 2 and len(_calls(env)) == 1
    assert json.loads(env.invoke("status", "--json").stdout)["sessions"]["idle_owed"] == 0


def test_the_final_pass_waits_for_the_running_one_and_reads_after_it(env, tmp_path):
    env.pop("REFLECT_CHECKPOINTS")
    prompts = tmp_path / "prompts"
    env.update(
        REFLECT_DEEP_MODEL="opus",
        STUB_CLAUDE_MODE="sequence",
        STUB_CLAUDE_SEQUENCE="sleep,ok",  # the first pass is slow, then answers
        STUB_CLAUDE_SLEEP="4",
        STUB_CLAUDE_STATE=str(tmp_path / "seq"),
        STUB_CLAUDE_PROMPTS=str(prompts),
    )
    s = GrowingSession(tmp_path / "s-grow.jsonl")
    s.turn(0, CORRECTIONS[0], tokens=20_000)
    s.turn(1, CORRECTIONS[1], filler=4, tokens=44_000)  # 22%: the first checkpoint
    _hook(env, s.path, "Stop")
    drain = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "90"],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: len(_calls(env)) == 1, timeout=60, what="the first pass's call")
        s.turn(2, CORRECTIONS[2], filler=4, tokens=50_000)
        _hook(env, s.path, "SessionEnd")  # the session ends while its pass is running
        out, err = drain.communicate(timeout=120)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 0, err
    assert _jobs(env) == [("Stop", "ok", False, "done"), ("SessionEnd", "ok", True, "done")]
    assert _models(env) == ["haiku", "opus"]
    with session_scope(env.settings().db_url) as db:
        details = [e.detail or "" for e in db.scalars(select(JobEvent))]
    assert any("waiting for the session's running pass" in d for d in details)
    final = slice_body((prompts / "2.txt").read_text())
    assert CORRECTIONS[1] not in final and CORRECTIONS[2] in final  # after the first pass


def test_enqueue_is_a_deep_pass_even_as_a_stop(env, tmp_path):
    env.pop("REFLECT_CHECKPOINTS")
    env.update(REFLECT_DEEP_MODEL="opus")
    s = GrowingSession(tmp_path / "s-grow.jsonl")
    s.turn(0, CORRECTIONS[0], tokens=2_000)  # 1%: a hook's Stop would make no call
    env.invoke("enqueue", str(s.path), "--event", "Stop")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _jobs(env) == [("Stop", "ok", True, "done")] and _models(env) == ["opus"]
