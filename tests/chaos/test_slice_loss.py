"""A job waiting at the write stage loses its slice file (``$REFLECT_HOME/slices/<job>.txt``).

Slices live outside the ledger (they hold user dialogue, 0600), so a person cleaning
``~/.reflect``, a tmp reaper or a restore from backup can delete one while its job waits
for budget. The job must not fail, be charged or send an empty prompt: it goes back to
prepare, which rebuilds the same slice (chunk hashes are only recorded when ``add``
commits, so nothing counts as "seen" yet), and then finishes ``ok``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import write_claude_transcript

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, utcnow

pytestmark = pytest.mark.chaos


def _job(env) -> dict:
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    return job


def test_deleted_slice_is_prepared_again_and_the_job_finishes(env, tmp_path: Path) -> None:
    t = write_claude_transcript(
        tmp_path / "s.jsonl", ["No, never run migrations from the web process; use a job."]
    )
    env["REFLECT_DRAIN_DAILY_MAX"] = "0"
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    job = _job(env)
    assert (job["stage"], job["state"]) == ("write", "deferred"), job
    slice_file = env.home / "slices" / f"{job_id}.txt"
    original_slice = slice_file.read_text()
    assert "never run migrations" in original_slice
    slice_file.unlink()

    # The cap is raised and the deferral's day is over (the only way to reach tomorrow
    # inside a test is to move the job's wake-up time; nothing else is touched).
    env["REFLECT_DRAIN_DAILY_MAX"] = "20"
    with session_scope(env.settings().db_url) as session:
        row = session.get(Job, job_id)
        assert row is not None
        row.next_run_at = utcnow()
    env.cli("drain", "--until-idle", "--max-seconds", "60")

    job = _job(env)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    assert len(list((env.kb / "documents").glob("*.md"))) == 1
    calls = [json.loads(x) for x in Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()]
    assert len(calls) == 1, "one paid call, made only after the slice was rebuilt"
    # The prompt carried the rebuilt slice, not an empty or missing one.
    assert calls[0]["prompt_chars"] > len(original_slice)
    events = json.loads(env.invoke("show", job_id, "--json").stdout)["events"]
    assert any("slice file missing" in (e.get("detail") or "") for e in events), events
    assert json.loads(env.invoke("cost", "--json").stdout)["total"]["entries"] == 1
