"""Edits to existing notes (proof, retirement) happen after the add commits, and survive a kill.

The add stage commits the ledger first and rewrites the notes afterwards, so that no file
I/O runs under the ledger's write lock. The commit records the owed edits on the job; a
process SIGKILLed right after it (failpoint ``after_commit:add``) leaves them pending, and
the next drain's recovery pass applies them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from support import BIN, transcripts_dir, write_claude_transcript

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, Learning

pytestmark = pytest.mark.chaos

PNPM_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"


def _drain(env, **extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "60", "-w", "1"],
        env=dict(env, **extra),
        capture_output=True,
        timeout=120,
    )


def _frontmatter(path: Path) -> dict:
    return yaml.safe_load(path.read_text().split("\n---\n", 1)[0].removeprefix("---\n"))


def _revise_pnpm_note(env, tmp_path) -> tuple[str, Path]:
    """One note from a real transcript, then a job whose answer UPDATEs and DELETEs it."""
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    assert _drain(env).returncode == 0
    note = env.kb / "documents" / f"{PNPM_ID}.md"
    assert _frontmatter(note)["status"] == "active"
    t = write_claude_transcript(
        tmp_path / "d.jsonl",
        ["No, stop using pnpm in the web workspace; we moved back to npm workspaces."],
    )
    actions = {
        "actions": [
            {"action": "UPDATE", "target_id": PNPM_ID, "reason": "the user said it again"},
            {"action": "DELETE", "target_id": PNPM_ID, "reason": "the workspace moved back to npm"},
        ]
    }
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(actions))
    return env.invoke("enqueue", str(t)).stdout.strip(), note


def _job_result(env, job_id: str) -> dict:
    with session_scope(env.settings().db_url) as s:
        return dict(s.get(Job, job_id).result or {})


def _assert_revised(env, note: Path, source: str) -> None:
    fm = _frontmatter(note)
    assert fm["status"] == "retired" and "npm" in fm["retired_reason"], fm
    assert fm["proof_count"] == 2 and source in fm["sources"], fm


def test_sigkill_after_add_commit_the_next_drain_applies_the_note_edits(env, tmp_path):
    job_id, note = _revise_pnpm_note(env, tmp_path)
    proc = _drain(env, REFLECT_FAILPOINTS="after_commit:add")
    assert proc.returncode == -9, f"the failpoint must kill the drain: {proc.stderr[-500:]!r}"
    # Committed: the job is done and the ledger holds the retirement and the proof …
    (job,) = [j for j in json.loads(env.invoke("jobs", "--json").stdout) if j["id"] == job_id]
    assert (job["state"], job["outcome"]) == ("done", "ok")
    with session_scope(env.settings().db_url) as s:
        row = s.scalars(select(Learning).where(Learning.id == PNPM_ID)).one()
        assert (row.status, row.proof_count) == ("retired", 2)
    result = _job_result(env, job_id)
    assert result["note_edits_applied"] is False
    assert [e["op"] for e in result["note_edits"]] == ["bump", "retire"]
    # … but the note was not rewritten: the process died first.
    fm = _frontmatter(note)
    assert fm["status"] == "active" and fm.get("proof_count", 1) == 1, fm

    assert _drain(env).returncode == 0
    _assert_revised(env, note, str(tmp_path / "d.jsonl"))
    assert _job_result(env, job_id)["note_edits_applied"] is True
    # The healing pass asked for a reindex: search no longer offers the retired note.
    found = json.loads(env.invoke("search", "pnpm", "--mode", "lexical", "--json").stdout)
    assert found["results"] == [] and found["reason"]


def test_note_edits_are_applied_after_the_commit_and_applying_again_changes_nothing(env, tmp_path):
    from huey.storage import SqliteStorage

    from reflect_jobs.limits import Caps
    from reflect_jobs.pipeline import note_edits
    from reflect_jobs.pipeline.runtime import Runtime

    job_id, note = _revise_pnpm_note(env, tmp_path)
    assert _drain(env).returncode == 0
    source = str(tmp_path / "d.jsonl")
    _assert_revised(env, note, source)
    result = _job_result(env, job_id)
    assert result["note_edits_applied"] is True
    assert result["note_edits"][0] == {
        "id": PNPM_ID,
        "op": "bump",
        "source": source,
        "at": result["note_edits"][1]["at"],
    }
    applied = note.read_bytes()

    class Recorder:
        def __init__(self) -> None:
            self.kb_changes = 0

        def schedule(self, stage, job_id, eta=None):  # type: ignore[no-untyped-def]
            raise AssertionError("healing note edits sends no stage message")

        def kb_changed(self) -> None:
            self.kb_changes += 1

    settings = env.settings()
    rec = Recorder()
    rt = Runtime(
        settings=settings,
        dispatcher=rec,
        caps=Caps(
            SqliteStorage("t", filename=str(tmp_path / "q.db")),
            daily_max=1,
            run_max=1,
            window_sec=60,
        ),
    )
    assert note_edits.heal(rt) == 0 and rec.kb_changes == 0, "nothing pending: nothing done"
    # Pretend the flag was never set (the kill window): healing again leaves the note as is.
    with session_scope(settings.db_url) as s:
        job = s.get(Job, job_id)
        job.result = {**job.result, "note_edits_applied": False}
    assert note_edits.heal(rt) == 1 and rec.kb_changes == 1
    assert note.read_bytes() == applied
    assert _job_result(env, job_id)["note_edits_applied"] is True
