"""reflect-jobs-hook on SessionStart / UserPromptSubmit: the harness's JSON, or nothing, fast."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest
from recall_support import add_note, learning, make_repo, reindex, session_start_in_process
from support import BIN

from reflect_jobs.recall import block, store

HOOK = str(BIN / "reflect-jobs-hook")
KEY = "github.com/acme/shop"


def _hook(env, payload, harness="claude", extra=()):
    return subprocess.run(
        [HOOK, harness, *extra],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )


def _setup(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    # The shop uses redis (its profile says so), so the global Redis rule fits it.
    (repo / "package.json").write_text('{"dependencies": {"redis": "4"}}')
    add_note(env.kb, learning("Shop is a pnpm workspace", "Run pnpm -w install", repo=KEY))
    add_note(
        env.kb,
        learning("Retry flaky Redis connections", "Wrap redis calls in a retry", scope="global"),
    )
    add_note(
        env.kb, learning("Keep commits small", "One logical change per commit", scope="global")
    )
    reindex(env.kb)
    return repo


def _queued(env) -> int:
    db = env.home / "queue.db"
    return (
        0
        if not db.exists()
        else sqlite3.connect(db).execute("select count(*) from task").fetchone()[0]
    )


def _errors(env) -> str:
    log = env.home / "hook-errors.log"
    return log.read_text() if log.exists() else ""


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_session_start_prints_the_harness_json_and_enqueues_nothing(env, tmp_path, harness):
    repo = _setup(env, tmp_path)
    payload = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}
    proc = _hook(env, {**payload, "cwd": str(repo / "web")}, harness)
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    assert list(out) == ["hookSpecificOutput"]
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "SessionStart"
    ctx = spec["additionalContext"]
    assert ctx.startswith(block.OPEN) and ctx.rstrip().endswith(block.CLOSE)
    assert "pnpm workspace" in ctx and "Retry flaky Redis" in ctx
    assert _queued(env) == 0 and _errors(env) == ""


def test_copilot_session_start_prints_additional_context(env, tmp_path):
    # Copilot CLI injects a sessionStart hook's {"additionalContext"} since 1.0.11; the
    # camelCase event carries no event-name field, hence --event (docs/HARNESSES.md).
    repo = _setup(env, tmp_path)
    payload = {"sessionId": "c", "timestamp": 1, "cwd": str(repo), "source": "new"}
    proc = _hook(env, payload, "copilot", ("--event", "sessionStart"))
    assert proc.returncode == 0 and proc.stdout.count(b"\n") == 1
    out = json.loads(proc.stdout)
    assert list(out) == ["additionalContext"]
    ctx = out["additionalContext"]
    assert ctx.startswith(block.OPEN) and ctx.rstrip().endswith(block.CLOSE)
    assert "pnpm workspace" in ctx and "Retry flaky Redis" in ctx
    assert _queued(env) == 0 and _errors(env) == ""
    # Copilot's prompt event is not answered: the capture path decides, and prints nothing.
    prompt = {"sessionId": "c", "cwd": str(repo), "prompt": "pnpm workspace install"}
    proc = _hook(env, prompt, "copilot", ("--event", "userPromptSubmitted"))
    assert proc.returncode == 0 and proc.stdout == b""


def test_no_store_yet_or_a_vanished_cwd_still_exit_0_with_json_or_nothing(env, tmp_path):
    payload = {"hook_event_name": "SessionStart", "cwd": str(tmp_path / "gone")}
    proc = _hook(env, payload)
    assert proc.returncode == 0 and proc.stdout == b"" and _errors(env) == ""
    _setup(env, tmp_path)
    proc = _hook(env, payload)  # the directory vanished: the global learnings are still told
    ctx = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    # ... those for any repository; a stack's rule needs a repository of that stack
    assert "Keep commits small" in ctx and "pnpm" not in ctx and "Redis" not in ctx


@pytest.mark.chaos
def test_a_damaged_store_prints_nothing_and_logs(env, tmp_path):
    repo = _setup(env, tmp_path)
    path = store.store_path(env.kb)
    for suffix in ("-wal", "-shm"):
        (tmp_path / "kb" / "index" / f"context.db{suffix}").unlink(missing_ok=True)
    with open(path, "r+b") as fh:
        fh.write(b"this is not sqlite" * 100)
    proc = _hook(env, {"hook_event_name": "SessionStart", "cwd": str(repo)})
    assert proc.returncode == 0 and proc.stdout == b""
    assert "DatabaseError" in _errors(env)


@pytest.mark.chaos
def test_a_locked_store_prints_nothing_and_logs(env, tmp_path):
    repo = _setup(env, tmp_path)
    holder = sqlite3.connect(store.store_path(env.kb), isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("DELETE FROM meta WHERE key = 'nothing'")
    try:
        proc = _hook(env, {"hook_event_name": "SessionStart", "cwd": str(repo)})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 0 and proc.stdout == b""
    assert "locked" in _errors(env)


def test_prompt_recall_is_opt_in_strong_only_and_at_most_three(env, tmp_path):
    repo = _setup(env, tmp_path)
    for i in range(5):
        add_note(
            env.kb,
            learning(f"Redis retry lesson {i}", "Retry redis connection errors", scope="global"),
        )
    reindex(env.kb)
    prompt = {
        "hook_event_name": "UserPromptSubmit",
        "cwd": str(repo),
        "prompt": "the redis connection keeps dropping, add a retry",
    }
    assert _hook(env, prompt).stdout == b"", "off unless REFLECT_RECALL_ON_PROMPT=1"
    env["REFLECT_RECALL_ON_PROMPT"] = "1"
    proc = _hook(env, prompt)
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    assert spec["hookEventName"] == "UserPromptSubmit"
    items = [x for x in spec["additionalContext"].splitlines() if x.startswith("- [")]
    assert 1 <= len(items) <= 3 and all("edis" in x for x in items)
    weak = {**prompt, "prompt": "please rename the variable foo"}
    assert _hook(env, weak).stdout == b""
    one_word = {**prompt, "prompt": "redis"}
    assert _hook(env, one_word).stdout == b"", "one shared word is not a strong match"
    assert _queued(env) == 0


def test_the_recall_path_imports_no_heavy_module(env, tmp_path):
    repo = _setup(env, tmp_path)
    ctx, heavy = session_start_in_process(env, repo)
    assert heavy == []
    assert "pnpm" in ctx


def test_a_reindex_writing_the_store_does_not_block_the_hook(env, tmp_path):
    repo = _setup(env, tmp_path)
    writer = store.open_for_write(store.store_path(env.kb))  # WAL: readers see the last commit
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM notes")
    try:
        proc = _hook(env, {"hook_event_name": "SessionStart", "cwd": str(repo)})
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    ctx = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "pnpm workspace" in ctx and _errors(env) == ""


@pytest.mark.chaos
def test_a_store_that_cannot_be_written_never_fails_the_reindex(env, tmp_path):
    path = tmp_path / "kb" / "index" / "context.db"
    path.mkdir(parents=True)  # a directory where the file should be
    add_note(env.kb, learning("Some lesson", "a rule", scope="global"))
    stats = reindex(env.kb)
    assert stats.inserted == 1
    assert any(e.startswith("context store:") for e in stats.errors)
    proc = _hook(env, {"hook_event_name": "SessionStart", "cwd": str(tmp_path)})
    assert proc.returncode == 0 and proc.stdout == b""
