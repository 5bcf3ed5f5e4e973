"""SIGKILL after the reflector wrote its events but before the add stage committed.

The restarted add stage applies the same answer again: every event id is derived from the
job, so the store's log must hold each change exactly once and the job still ends done/ok.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from recall_support import make_repo
from support import BIN, job_state, lease_expired, wait_for, write_claude_transcript

pytestmark = pytest.mark.chaos


def test_a_killed_add_stage_rerun_appends_no_reflection_event_twice(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    env.cli(
        "items", "add", "--kind", "action", "--title", "Fix the login test", "--repo", str(repo)
    )
    env.update(
        REFLECT_LEASE_SEC="2",
        STUB_CLAUDE_MODE="close_offered",
        STUB_CLAUDE_CLOSE="login",
        STUB_CLAUDE_NEW=json.dumps([{"kind": "question", "title": "Why does CI use py3.11?"}]),
        STUB_CLAUDE_SUMMARY="Closed the login test.",
    )
    t = write_claude_transcript(tmp_path / "s-kill.jsonl", ["No, never retry tests by hand."])
    lines = [json.loads(x) for x in t.read_text().splitlines()]
    t.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    dying = dict(env, REFLECT_FAILPOINTS="before_commit:add")
    proc = subprocess.run(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "60", "-w", "1"],
        env=dying,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr[-500:]
    (log,) = Path(env.kb, "repos").glob("*/reflections/*.jsonl")
    before = log.read_text().splitlines()
    assert len(before) == 4, "the item, its done, the new item and the summary"
    db = env.settings().db_url
    wait_for(lambda: lease_expired(db, job_id), timeout=60, what="the dead worker's lease expiring")
    env.cli("drain", "--until-idle", "--max-seconds", "90")
    assert job_state(db, job_id) == "done"
    after = log.read_text().splitlines()
    assert after == before, "the re-run appended nothing"
    ops = Counter(json.loads(x)["op"] for x in after)
    assert ops == {"add": 3, "done": 1}
    items = json.loads(
        env.cli("items", "list", "--status", "all", "--repo", str(repo), "--json").stdout
    )
    assert sorted((i["kind"], i["status"]) for i in items) == [
        ("action", "done"),
        ("question", "open"),
        ("summary", "note"),
    ]
