"""SIGKILL at every stage boundary: no job lost, no duplicate note, no double-paid call.

Each trial arms one failpoint (``reflect_jobs.faults``) in a real consumer process, lets it
die there with SIGKILL, then restarts a consumer without it and checks the invariants. The
lease is the default (six minutes): the restarted consumer takes the job back at once
because its owner on this host is provably gone, not because a lease ran out.
`make test` runs CHAOS_TRIALS=1 trial per point; `make chaos` (CHAOS_TRIALS=20) twenty.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import BIN, job_state, write_claude_transcript

POINTS = [
    "after_claim:prepare",
    "after_claim:write",
    "after_record",
    "after_claim:add",
    "after_notes",
    "before_commit:add",
]
TRIALS = int(os.environ.get("CHAOS_TRIALS", "1"))

pytestmark = pytest.mark.chaos


def _calls(env) -> int:
    p = Path(env["STUB_CLAUDE_LOG"])
    return len(p.read_text().splitlines()) if p.exists() else 0


@pytest.mark.parametrize("trial", range(TRIALS))
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_boundary(env, tmp_path, point, trial):
    env.update(REFLECT_DRAIN_TIMEOUT="120")
    t = write_claude_transcript(
        tmp_path / "c.jsonl", [f"No, never swallow exceptions in worker {trial}; log and re-raise."]
    )
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    dying = dict(env, REFLECT_FAILPOINTS=point)
    proc = subprocess.run(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "60", "-w", "1"],
        env=dying,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -9, (
        f"the failpoint {point} must kill the process: {proc.stderr[-500:]!r}"
    )
    paid_before = _calls(env)
    db = env.settings().db_url
    assert job_state(db, job_id) == "running", "killed holding the job"
    env.cli("drain", "--until-idle", "--max-seconds", "90")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    notes = list((env.kb / "documents").glob("*.md"))
    assert len(notes) == 1, "exactly one note: no duplicate, none lost"
    # Killed before the call: the restart makes the one call. Killed after the answer was
    # recorded: the restart reuses it. Either way the model is called exactly once.
    assert _calls(env) == 1 and paid_before <= 1
    cost = json.loads(env.invoke("cost", "--json").stdout)["total"]
    assert cost["entries"] == 1
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert shown["recoveries"] == 1
