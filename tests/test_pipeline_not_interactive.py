"""A session no person took part in ends ``done``/``skip_not_interactive`` for $0 (item 3).

Through the real CLI and a real consumer: the headless ``claude -p`` fixture is full of
correction-shaped lines, yet no model is called and the job says why it was skipped.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from support import DATA

HEADLESS = (
    DATA / "transcripts" / "constructed" / "claude-code" / "constructed-cc2.1.214-headless.jsonl"
)


def test_headless_session_is_skipped_for_free_with_its_reason(env, tmp_path: Path) -> None:
    t = tmp_path / "0b1c-headless.jsonl"
    shutil.copy(HEADLESS, t)
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "skip_not_interactive")
    assert not os.path.exists(env["STUB_CLAUDE_LOG"]), "no model call"
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert "sdk-cli" in shown["events"][-1]["detail"]
    cost = json.loads(env.invoke("cost", "--json").stdout)
    assert cost["total"]["entries"] == 0
