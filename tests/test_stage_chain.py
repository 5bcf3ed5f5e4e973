"""The stage runners' middleware chain (``pipeline/middleware.py``): the kill switch and the
dry run stop every stage — the add stage too, which used to ignore ``REFLECT_DISABLED``.

In process, against a real SQLite ledger and the stub ``claude`` (``watermark_support``).
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import func, select
from support import write_claude_transcript
from watermark_support import InProcess

from reflect_jobs import pipeline
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import JobEvent, Learning


def _events(db: str, job_id: str) -> int:
    with session_scope(db) as s:
        return int(
            s.scalar(select(func.count()).select_from(JobEvent).where(JobEvent.job_id == job_id))
        )


def _learnings(db: str) -> int:
    with session_scope(db) as s:
        return int(s.scalar(select(func.count()).select_from(Learning)))


def _at_add(env, tmp_path, monkeypatch) -> tuple[InProcess, str]:  # type: ignore[no-untyped-def]
    """A job whose paid answer is in: queued at ``add``."""
    run = InProcess(env, tmp_path, monkeypatch)
    t = write_claude_transcript(tmp_path / "k.jsonl", ["No, never log the request body."])
    job_id = pipeline.run_capture(run.rt, "claude", "kill", str(t), "Stop", 0)
    pipeline.run_prepare(run.rt, job_id)
    pipeline.run_write(run.rt, job_id)
    job = run.job(job_id)
    assert (job.stage, job.state) == ("add", "queued")
    return run, job_id


def test_the_kill_switch_stops_the_add_stage(env, tmp_path, monkeypatch):
    run, job_id = _at_add(env, tmp_path, monkeypatch)
    db = run.settings.db_url
    before = _events(db, job_id)
    run.rt.settings = dataclasses.replace(run.settings, disabled=True)
    pipeline.run_add(run.rt, job_id)
    job = run.job(job_id)
    assert (job.stage, job.state, job.outcome) == ("add", "queued", "ok")
    assert _events(db, job_id) == before, "not even claimed"
    assert _learnings(db) == 0 and not list((env.kb / "documents").glob("*.md"))
    run.rt.settings = run.settings  # switched back on: the job goes on from its place
    pipeline.run_add(run.rt, job_id)
    job = run.job(job_id)
    assert (job.stage, job.state, job.outcome) == ("done", "done", "ok")
    assert _learnings(db) == 1 and len(list((env.kb / "documents").glob("*.md"))) == 1


def test_a_dry_run_moves_no_stage(env, tmp_path, monkeypatch):
    run, job_id = _at_add(env, tmp_path, monkeypatch)
    db = run.settings.db_url
    before = _events(db, job_id)
    run.rt.settings = dataclasses.replace(run.settings, dry_run=True)
    pipeline.run_add(run.rt, job_id)
    assert _events(db, job_id) == before and _learnings(db) == 0
    assert run.job(job_id).state == "queued"


def test_a_stage_error_in_the_claim_ends_the_attempt(env, tmp_path, monkeypatch):
    """The chain's outermost middleware: an exception (here, the after-claim failpoint)
    poisons the job at once, as ``tasks.py``'s guard did."""
    run, job_id = _at_add(env, tmp_path, monkeypatch)
    monkeypatch.setenv("REFLECT_FAILPOINTS", "after_claim:add=raise")
    pipeline.run_add(run.rt, job_id)
    job = run.job(job_id)
    assert (job.state, job.outcome) == ("poisoned", "poison_stage_error")
    assert "FailpointError" in (job.error or "")
