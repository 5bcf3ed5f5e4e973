"""The KB side of the pipeline: coalesced reindex, retirement, twins, search, import hygiene."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import transcripts_dir, write_claude_transcript

PNPM_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"


def _drain(env):
    env.invoke("drain", "--until-idle", "--max-seconds", "120")


def _frontmatter(path: Path) -> dict:
    return yaml.safe_load(path.read_text().split("\n---\n", 1)[0].removeprefix("---\n"))


def test_coalesced_kb_tasks_one_message_for_a_burst(env):
    code = (
        "from reflect_jobs import tasks\n"
        "for _ in range(10): tasks.HueyDispatcher().kb_changed()\n"
        "print(tasks.huey.pending_count())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=dict(env), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "1"


def test_burst_of_ten_adds_reindexes_far_fewer_than_ten_times_and_indexes_all(env, tmp_path):
    env["REFLECT_WRITER_BACKEND"] = "heuristic"  # one distinct learning per transcript
    for i in range(10):
        t = write_claude_transcript(
            tmp_path / f"b{i}.jsonl",
            [f"No, never bind the admin API to port {9000 + i}; read the port from the config."],
        )
        env.invoke("enqueue", str(t), "--session-id", f"b{i}")
    _drain(env)
    log = [json.loads(line) for line in (env.home / "drain.log").read_text().splitlines()]
    reindexes = [x for x in log if x.get("event") == "reindexed"]
    assert 1 <= len(reindexes) < 10
    hits = json.loads(
        env.invoke("search", "admin API port", "--mode", "lexical", "-k", "20", "--json").stdout
    )["results"]
    assert len(hits) == 10 == len(list((env.kb / "documents").glob("*.md")))


def test_delete_of_a_listed_id_retires_the_note_and_search_hides_it(env, tmp_path):
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _drain(env)
    assert (
        json.loads(env.invoke("search", "pnpm", "--mode", "lexical", "--json").stdout)["results"][
            0
        ]["id"]
        == PNPM_ID
    )
    t = write_claude_transcript(
        tmp_path / "d.jsonl",
        ["No, stop using pnpm in the web workspace; we moved back to npm workspaces."],
    )
    actions = {
        "actions": [
            {"action": "DELETE", "target_id": PNPM_ID, "reason": "the workspace moved back to npm"}
        ]
    }
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(actions))
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    _drain(env)
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert "deleted=1" in shown["events"][-1]["detail"]
    note = env.kb / "documents" / f"{PNPM_ID}.md"
    assert note.exists(), "retirement keeps the note on disk"
    fm = _frontmatter(note)
    assert fm["status"] == "retired" and "npm" in fm["retired_reason"]
    found = json.loads(env.invoke("search", "pnpm", "--mode", "lexical", "--json").stdout)
    assert found["results"] == [] and found["reason"]


def test_show_slice_prints_the_private_slice_while_the_job_waits(env, tmp_path):
    env["REFLECT_DRAIN_DAILY_MAX"] = "0"  # the job waits at write with its slice on disk
    t = write_claude_transcript(
        tmp_path / "s.jsonl",
        ["No, never print the token <private>sk-live-abc</private>, it's wrong."],
    )
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    _drain(env)
    out = env.invoke("show", job_id, "--slice").stdout
    assert "never print the token" in out and "sk-live-abc" not in out
    slice_file = next((env.home / "slices").glob("*.txt"))
    assert oct(slice_file.stat().st_mode & 0o777) == "0o600"


def test_signal_set_seen_before_bumps_proof_and_skips(env, tmp_path):
    # The copy is a four-turn working session: since issue 26 such a session earns a
    # reflection pass even when its signal set was seen before. This test is about the
    # learning side (proof bumped, no second learning, $0), so the reflection threshold is
    # set above the session's turns; test_reflection_pass_e2e covers the pass itself.
    env["REFLECT_REFLECT_MIN_TURNS"] = "50"
    t = write_claude_transcript(
        tmp_path / "one.jsonl", ["Wrong: always close the cursor before committing."]
    )
    env.invoke("enqueue", str(t), "--session-id", "one")
    _drain(env)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(t.read_bytes())
    job_id = env.invoke("enqueue", str(copy), "--session-id", "copy").stdout.strip()
    _drain(env)
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert (
        shown["outcome"] == "skip_dup_signal_hash"
        and "proof_bumped=1" in shown["events"][-1]["detail"]
    )
    from sqlalchemy import select

    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Learning

    with session_scope(env.settings().db_url) as s:
        (row,) = s.scalars(select(Learning)).all()
        assert row.proof_count == 2


@pytest.mark.parametrize("kind", ["binary", "empty", "directory", "vanished", "truncated"])
def test_bad_transcripts_end_with_a_clear_outcome(env, tmp_path, kind):
    t = tmp_path / f"{kind}.jsonl"
    good = write_claude_transcript(tmp_path / "good.jsonl", ["No, never use eval on user input."])
    t.write_bytes(good.read_bytes())
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    if kind == "binary":
        t.write_bytes(bytes(range(256)) * 100)
    elif kind == "empty":
        t.write_bytes(b"")
    elif kind == "directory":
        t.unlink()
        t.mkdir()
    elif kind == "vanished":
        t.unlink()
    elif kind == "truncated":
        t.write_bytes(good.read_bytes()[:-40] + b'\n{"type": "user", "mess')
    _drain(env)
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    expected = {
        "binary": "skip_unreadable",
        "empty": "skip_unreadable",
        "directory": "skip_unreadable",
        "vanished": "stale",
        "truncated": "ok",
    }[kind]
    assert (job["state"], job["outcome"]) == ("done", expected)
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert shown["events"][-1]["detail"], "a reason is recorded"


def test_cli_status_and_hook_never_import_torch_or_the_index(env):
    code = (
        "import sys, reflect_jobs.cli, reflect_jobs.tasks, reflect_jobs.hook\n"
        "bad = [m for m in ('torch', 'sentence_transformers', 'nano_graphrag') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], env=dict(env), check=True)
    hook = "import sys, reflect_jobs.hook\nbad=[m for m in ('huey','sqlalchemy','structlog','click','redis') if m in sys.modules]\nassert not bad, bad"
    subprocess.run([sys.executable, "-c", hook], env=dict(env), check=True)


@pytest.mark.slow
def test_vectors_hybrid_search_and_semantic_twin(env, tmp_path):
    """With the real offline MiniLM: hybrid search, and a near-duplicate CREATE becomes proof."""
    env.update(REFLECT_INDEX_VECTORS="1", REFLECT_DEDUP_THRESHOLD="0.95")
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    _drain(env)
    hits = json.loads(
        # Every word in the note: the relevance floor drops a hit sharing 2 of 4 words in a
        # one-note KB (tests/test_search_relevance.py).
        env.invoke("search", "npm install breaks the lockfile", "--json").stdout
    )["results"]
    assert hits and hits[0]["id"] == PNPM_ID
    twin = json.loads(
        json.loads((Path(__file__).parent / "stubs" / "answers" / "success.json").read_text())[
            "result"
        ]
    )
    twin["actions"][0]["learning"]["rule"] = (
        "Always use pnpm in this repository"  # another id, same meaning
    )
    twin["actions"][0]["learning"]["evidence"] = "pnpm, not npm, in the web workspace"
    t = write_claude_transcript(
        tmp_path / "tw.jsonl", ["No, I already told you: pnpm, not npm, in the web workspace."]
    )
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(twin))
    job_id = env.invoke("enqueue", str(t)).stdout.strip()
    _drain(env)
    assert [p.name for p in (env.kb / "documents").glob("*.md")] == [f"{PNPM_ID}.md"]
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert "updated=1" in shown["events"][-1]["detail"]
    fm = _frontmatter(env.kb / "documents" / f"{PNPM_ID}.md")
    assert fm["proof_count"] == 2
