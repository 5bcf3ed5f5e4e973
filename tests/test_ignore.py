"""A repository can opt out (issue 23 item 6), and per-prompt recall works as installed (item 5).

``reflect-jobs ignore`` writes the repository's key into the user config file; a real hook
process then tells that repository nothing, and a real capture of its session (through the
real hook and a real drain with the stub ``claude``) ends ``skip_ignored`` with no model call
and no cost row — while another repository is told and captured as before.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner
from recall_support import add_note, learning, make_repo, reindex
from sqlalchemy import select
from support import BIN, write_claude_transcript

from reflect_jobs.cli import main
from reflect_jobs.hook_errors import recent
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow, Job
from reflect_jobs.userconfig import config_path

HOOK = str(BIN / "reflect-jobs-hook")
KEY = "github.com/acme/shop"


def _cli(env, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), env=dict(env))


def _hook(env, payload, harness="claude", extra=()):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [HOOK, harness, *extra],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )


def _repos(env, tmp_path):  # type: ignore[no-untyped-def]
    shop = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    other = make_repo(tmp_path / "other", "git@github.com:acme/other.git")
    add_note(env.kb, learning("Shop is a pnpm workspace", "Run pnpm -w install", repo=KEY))
    add_note(
        env.kb, learning("Other uses poetry", "Run poetry install", repo="github.com/acme/other")
    )
    add_note(env.kb, learning("Never use a bare except", "Catch it", scope="global"))
    reindex(env.kb)
    return shop, other


def test_ignore_list_unignore_round_trip_in_the_config_file(env, tmp_path):
    shop, other = _repos(env, tmp_path)
    out = _cli(env, "ignore", str(shop))
    assert out.exit_code == 0 and out.stdout.startswith(f"{KEY}: ignored")
    assert _cli(env, "ignore", str(shop)).stdout.strip() == f"{KEY}: already ignored"
    assert json.loads(_cli(env, "ignore", "--list", "--json").stdout) == [KEY]
    text = Path(config_path(dict(env))).read_text()
    assert f'ignore = ["{KEY}"]' in text
    assert not any(p.name != ".git" for p in shop.iterdir()), "nothing written in the repo"
    # `install hooks` re-records its settings and keeps the person's list
    assert _cli(env, "install", "hooks", "--harness", "claude", "--settings",
                str(tmp_path / "settings.json")).exit_code == 0  # fmt: skip
    assert json.loads(_cli(env, "ignore", "--list", "--json").stdout) == [KEY]
    out = _cli(env, "unignore", KEY)  # by key: the checkout may be gone
    assert out.exit_code == 0 and json.loads(_cli(env, "ignore", "--list", "--json").stdout) == []
    again = _cli(env, "unignore", str(other))
    assert again.exit_code == 1 and again.output.strip() == (
        "Error: github.com/acme/other: not ignored"
    )


def test_an_ignored_repository_is_told_nothing_and_captured_for_nothing(env, tmp_path):
    shop, other = _repos(env, tmp_path)
    env["REFLECT_RECALL_ON_PROMPT"] = "1"
    assert _cli(env, "ignore", str(shop)).exit_code == 0

    start = {"hook_event_name": "SessionStart", "cwd": str(shop)}
    proc = _hook(env, start)
    assert proc.returncode == 0 and proc.stdout == b"", "told nothing"
    assert recent(env.home) == [], "told nothing because it is ignored, not because it failed"
    prompt = {"hook_event_name": "UserPromptSubmit", "cwd": str(shop), "prompt": "pnpm install"}
    assert _hook(env, prompt).stdout == b""
    copilot = _hook(
        env, {"sessionId": "c", "cwd": str(shop)}, "copilot", ("--event", "sessionStart")
    )
    assert copilot.stdout == b""
    told = json.loads(_hook(env, {**start, "cwd": str(other)}).stdout)
    assert "poetry" in told["hookSpecificOutput"]["additionalContext"], "others are told"

    # A session in the ignored repository, captured by the real hook, then drained.
    correction = "No, that's wrong: always run pnpm install from the repository root."
    transcript = write_claude_transcript(tmp_path / "s-shop.jsonl", [correction], session="s-shop")
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    transcript.write_text("\n".join(json.dumps({**r, "cwd": str(shop)}) for r in lines) + "\n")
    stop = {
        "session_id": "s-shop",
        "transcript_path": str(transcript),
        "hook_event_name": "SessionEnd",
        "cwd": str(shop),
    }
    assert _hook(env, stop).returncode == 0
    # And one enqueued by hand (no cwd on the message: the transcript's own is read, $0).
    env.invoke("enqueue", str(transcript), "--session-id", "s-shop-manual")
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    with session_scope(env.settings().db_url, readonly=True) as s:
        jobs = s.execute(select(Job.session_id, Job.state, Job.outcome)).all()
        costs = s.execute(select(CostRow.outcome, CostRow.cost_usd, CostRow.tokens)).all()
    assert sorted(jobs) == [
        ("s-shop", "done", "skip_ignored"),
        ("s-shop-manual", "done", "skip_ignored"),
    ]
    assert costs == [("skip_ignored", 0.0, 0)] * 2, "never captured for pay: $0 rows only"
    log = tmp_path / "claude-calls.jsonl"
    assert not log.exists() or log.read_text() == "", "no model call"
    assert not any(p.name != ".git" for p in shop.iterdir()), "nothing written in the repo"
    assert (
        list((env.kb / "documents").glob("*.md"))
        and len(list((env.kb / "documents").glob("*.md"))) == 3
    ), "no learning written from it"


def test_per_prompt_recall_works_as_installed_and_survives_a_reinstall(env, tmp_path):
    shop, _ = _repos(env, tmp_path)
    settings = tmp_path / "settings.json"
    install = ("install", "hooks", "--harness", "claude", "--settings", str(settings))
    out = _cli({**env, "REFLECT_RECALL_ON_PROMPT": "1"}, *install)
    assert out.exit_code == 0, out.output
    assert "recall_on_prompt = true" in Path(config_path(dict(env))).read_text()
    assert "UserPromptSubmit" in json.loads(settings.read_text())["hooks"]
    # The harness runs the hook without the variable: the config file carries it.
    prompt = {
        "hook_event_name": "UserPromptSubmit",
        "cwd": str(shop),
        "prompt": "pnpm workspace install",
    }
    told = json.loads(_hook(env, prompt).stdout)["hookSpecificOutput"]
    assert told["hookEventName"] == "UserPromptSubmit" and "pnpm" in told["additionalContext"]
    # Re-running install from a shell without the variable keeps it.
    assert _cli(env, *install).exit_code == 0
    assert "UserPromptSubmit" in json.loads(settings.read_text())["hooks"]
    assert "recall_on_prompt = true" in Path(config_path(dict(env))).read_text()
    assert _hook(env, prompt).stdout != b""
