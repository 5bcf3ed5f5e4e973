"""The whole pipeline through the real CLI, a real Huey consumer and the stub claude."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from support import (
    BIN,
    hang_first_model_call,
    transcripts_dir,
    wait_for,
    write_claude_transcript,
)

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow, Job, JobEvent, Learning, utcnow


def _jobs(env):
    return json.loads(env.invoke("jobs", "--json").stdout)


def _calls(env) -> int:
    p = env["STUB_CLAUDE_LOG"]
    return len(Path(p).read_text().splitlines()) if os.path.exists(p) else 0


def _notes(env):
    d = env.kb / "documents"
    return sorted(p.name for p in d.glob("*.md")) if d.exists() else []


def test_real_transcript_end_to_end_one_note_indexed_and_searchable(env):
    t = transcripts_dir() / "python-to-rust-port.jsonl"
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = _jobs(env)
    assert job["id"] == job_id and (job["stage"], job["state"], job["outcome"]) == (
        "done",
        "done",
        "ok",
    )
    assert job["attempts"] == 1 and _calls(env) == 1
    assert _notes(env) == ["lrn-use-pnpm-not-npm-in-the-web-workspace-d96def.md"]
    call = json.loads(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()[0])
    assert call["child_env"] == "1" and "--allowedTools" in call["argv"]
    hits = json.loads(env.invoke("search", "pnpm lockfile", "--mode", "lexical", "--json").stdout)[
        "results"
    ]
    assert hits and hits[0]["id"] == "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"
    cost = json.loads(env.invoke("cost", "--json").stdout)
    assert cost["total"]["entries"] == 1 and cost["total"]["cost_usd"] > 0
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    states = [e["to"] for e in shown["events"]]
    assert states == ["queued", "running", "queued", "running", "queued", "running", "done"]
    assert not list((env.home / "slices").glob("*")), "slice removed when the job finished"


def test_unchanged_recapture_is_free_and_grown_transcript_sends_only_new_windows(env, tmp_path):
    t = write_claude_transcript(
        tmp_path / "grow.jsonl",
        ["No, never use a bare except in this codebase; catch KeyError."],
        trailing=True,
    )
    env.invoke("enqueue", str(t), "--session-id", "g")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    env.invoke("enqueue", str(t), "--session-id", "g")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    outcomes = sorted(j["outcome"] for j in _jobs(env))
    assert outcomes == ["ok", "skip_unchanged"] and _calls(env) == 1
    write_claude_transcript(
        t,
        [
            "No, never use a bare except in this codebase; catch KeyError.",
            "Wrong: always run the migrations with alembic upgrade head, not create_all.",
        ],
        trailing=True,
    )
    job_id = env.invoke("enqueue", str(t), "--session-id", "g").stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _calls(env) == 2
    last = json.loads(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()[-1])
    stats = json.loads(env.invoke("show", job_id, "--json").stdout)["prepare_stats"]
    # The session's watermark keeps the already-reflected window out of the slice entirely.
    assert stats["lines_before_watermark"] > 0 and stats["watermark"]["since"] > 0
    assert (stats["chunks_total"], stats["chunks_skipped"]) == (1, 0)
    assert last["prompt_chars"] > 0


def test_daily_cap_defers_without_failing_or_charging(env, tmp_path):
    env["REFLECT_DRAIN_DAILY_MAX"] = "1"
    for i in range(3):
        t = write_claude_transcript(
            tmp_path / f"c{i}.jsonl",
            [f"No, that's wrong: never call service {i} without a timeout."],
        )
        env.invoke("enqueue", str(t), "--session-id", f"cap{i}")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    states = sorted((j["state"], j["outcome"]) for j in _jobs(env))
    assert states == [("deferred", None), ("deferred", None), ("done", "ok")]
    assert _calls(env) == 1
    status = json.loads(env.invoke("status", "--json").stdout)
    assert status["budget"] == {"day": status["budget"]["day"], "used": 1, "limit": 1}
    deferred = [j for j in _jobs(env) if j["state"] == "deferred"]
    assert all(j["next_run_at"] > utcnow().isoformat() for j in deferred)


def test_zero_turn_answer_halts_the_write_stage_for_free_until_resume(env, tmp_path):
    env["STUB_CLAUDE_MODE"] = "zero_turns"
    for i in range(2):
        t = write_claude_transcript(
            tmp_path / f"h{i}.jsonl", [f"Never deploy on friday {i}, I already told you."]
        )
        env.invoke("enqueue", str(t), "--session-id", f"h{i}")
    # One worker: a call already in flight on another worker cannot be recalled, but no
    # call may *start* once the halt is recorded.
    env.invoke("drain", "--until-idle", "--max-seconds", "60", "-w", "1")
    assert sorted(j["state"] for j in _jobs(env)) == ["halted", "halted"]
    assert _calls(env) == 1, "the second job must not call a broken install"
    status = json.loads(env.invoke("status", "--json").stdout)
    assert status["halted"] and status["budget"]["used"] == 0
    assert "halted" in env.invoke("status").stdout.lower()
    assert env.invoke("doctor", check=False).returncode == 1
    env["STUB_CLAUDE_MODE"] = "ok"
    env.invoke("resume")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert sorted(j["outcome"] for j in _jobs(env)) == ["ok", "ok"]


def test_poisoned_job_can_be_retried(env, tmp_path):
    env["STUB_CLAUDE_MODE"] = "prose"
    env["REFLECT_DRAIN_INVALID_THRESHOLD"] = "1"
    t = write_claude_transcript(
        tmp_path / "p.jsonl", ["Stop doing that, the rule is tabs not spaces."]
    )
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("poisoned", "poison_writer_drift")
    assert job_id in env.invoke("poison", "list").stdout
    env["STUB_CLAUDE_MODE"] = "ok"
    assert "queued at write" in env.invoke("retry", job_id).stdout
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _jobs(env)[0]["outcome"] == "ok"
    assert env.invoke("retry", job_id, check=False).returncode == 1


@pytest.mark.chaos
def test_recorded_answer_is_reused_after_a_crash_never_paid_twice(env, tmp_path, monkeypatch):
    """A worker died after the answer was recorded: recovery applies it without a new call."""
    from reflect_jobs.writer.selection import make_backend

    t = write_claude_transcript(
        tmp_path / "r.jsonl", ["No, never commit the .env file; the rule is to use the vault."]
    )
    env["REFLECT_DRAIN_DRY_RUN"] = "0"
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    env["STUB_CLAUDE_MODE"] = "prose"  # what a second (forbidden) call would get
    # Run prepare only: the write stage is halted so the job waits at write.
    from reflect_jobs.ledger import control

    settings = env.settings()
    with session_scope(settings.db_url) as s:
        control.set_flag(s, control.HALT_KEY, "test: hold writes")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    # Simulate the crashed worker: it claimed the job, paid, recorded the answer, died.
    ok_env = dict(env, STUB_CLAUDE_MODE="ok", STUB_CLAUDE_LOG=str(tmp_path / "paid.jsonl"))
    for k, v in ok_env.items():  # the in-process backend hands its environment to the stub
        if k.startswith("STUB_"):
            monkeypatch.setenv(k, v)
    from reflect_jobs.writer.prompt import build_prompt

    with session_scope(settings.db_url) as s:
        sent = Path(s.get(Job, job_id).slice_path).read_text(encoding="utf-8")
    result = make_backend(  # the call the dead worker made: the job's own prompt
        "claude",
        claude_bin=env["REFLECT_DRAIN_CLAUDE_BIN"],
        model="sonnet",
        cwd=str(tmp_path),
        drain_timeout=300,
    ).call(build_prompt(sent, allowed_ids=[]))
    from reflect_jobs.ledger import costs

    with session_scope(settings.db_url) as s:
        control.clear_flag(s, control.HALT_KEY)
        job = s.get(Job, job_id)
        job.state, job.stage = "running", "write"
        job.lease_owner, job.lease_expires_at = "dead-worker", utcnow() - timedelta(seconds=5)
        costs.record_attempt(s, job, result)
        job.attempts += 1
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (j,) = _jobs(env)
    assert (j["state"], j["outcome"]) == ("done", "ok")
    assert _calls(env) == 0, "the recorded answer was reused; no second paid call"
    with session_scope(settings.db_url) as s:
        rows = s.scalars(select(CostRow).where(CostRow.job_id == job_id)).all()
        assert [(r.outcome, r.entries, r.consumed) for r in rows] == [("ok", 1, True)]
        assert s.scalar(select(func.count()).select_from(Learning)) == 1


@pytest.mark.chaos
def test_sigkill_during_the_model_call_recovers_and_finishes_once(env, tmp_path):
    t = write_claude_transcript(
        tmp_path / "k.jsonl", ["No, wrong again: always pin the docker base image digest."]
    )
    hang_first_model_call(env, tmp_path, lease_sec=360)  # only a reclaim can be quick
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    consumer = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "2"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: _calls(env) >= 1, timeout=60)
    finally:
        os.killpg(consumer.pid, signal.SIGKILL)
        consumer.wait(10)
    db = env.settings().db_url
    with session_scope(db) as s:
        assert s.get(Job, job_id).state == "running"
    # The drain's start-up recovery proves the owner gone: no lease to wait out.
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    assert len(_notes(env)) == 1
    with session_scope(env.settings().db_url) as s:
        details = [
            e.detail or "" for e in s.scalars(select(JobEvent).where(JobEvent.job_id == job_id))
        ]
        assert any("owner" in d and "is gone" in d for d in details)
        assert s.get(Job, job_id).recoveries == 1
        assert s.scalar(select(func.count()).select_from(Learning)) == 1


def test_stage_runners_are_idempotent(env, tmp_path, monkeypatch):
    """Running any stage task twice changes nothing the second time."""
    from huey.storage import SqliteStorage

    from reflect_jobs import pipeline
    from reflect_jobs.limits import Caps

    class Recorder:
        def __init__(self):
            self.sent = []

        def schedule(self, stage, job_id, eta=None):
            self.sent.append(stage)

        def kb_changed(self):
            self.sent.append("kb")

    t = write_claude_transcript(
        tmp_path / "i.jsonl", ["No, the rule is: never log the request body."]
    )
    s = env.settings()
    for k, v in env.items():
        if k.startswith("STUB_"):
            monkeypatch.setenv(k, v)
    rec = Recorder()
    rt = pipeline.Runtime(
        settings=s,
        dispatcher=rec,
        caps=Caps(
            SqliteStorage("reflect", filename=str(tmp_path / "q.db")),
            daily_max=20,
            run_max=3,
            window_sec=600,
        ),
        worker="w1",
    )
    job_id = pipeline.run_capture(rt, "claude", "idem", str(t), "Stop", 0)
    for stage, run in (
        ("prepare", pipeline.run_prepare),
        ("write", pipeline.run_write),
        ("add", pipeline.run_add),
    ):
        run(rt, job_id)
        with session_scope(s.db_url) as sess:
            before = sess.scalar(select(func.count()).select_from(JobEvent))
        run(rt, job_id)
        with session_scope(s.db_url) as sess:
            assert sess.scalar(select(func.count()).select_from(JobEvent)) == before, stage
    assert rec.sent == ["prepare", "write", "add", "kb"]
    assert _calls(env) == 1
