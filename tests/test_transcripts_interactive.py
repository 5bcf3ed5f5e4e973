"""Sessions no person took part in are recognised by their records (issue item 3).

Headless ``claude -p``/Agent SDK runs (``entrypoint`` ``sdk-*``), ``codex exec`` runs
(``session_meta`` originator ``codex_exec`` / source ``exec``), subagent transcripts
(``isSidechain``/``agentId``) and compaction agents (Claude Code's summary prompt) skip for $0
as ``not_interactive``, whatever their path and however many signals they hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from transcript_records import cc_assistant, cc_user, cx_meta, cx_msg, cx_typed, write_jsonl

from reflect_jobs.cascade import EmptyLedger, detect_signals, gate, prepare
from reflect_jobs.transcripts import read_transcript

CORRECTION = "No, that's wrong. Never use a bare except; use KeyError instead."


def _verdict(path: Path):
    t = read_transcript(path)
    return gate(t, detect_signals(t.turns))


@pytest.mark.parametrize("entrypoint", ["sdk-cli", "sdk-py", "sdk-ts"])
def test_headless_claude_is_not_interactive(tmp_path: Path, entrypoint: str) -> None:
    recs = [
        cc_user(CORRECTION, entrypoint=entrypoint, isSidechain=False),
        cc_assistant("Fixed by catching KeyError.", entrypoint=entrypoint),
    ]
    t = read_transcript(write_jsonl(tmp_path / "x.jsonl", recs))
    assert entrypoint in t.not_interactive
    assert (gate(t, detect_signals(t.turns)).reason) == "not_interactive"


@pytest.mark.parametrize("entrypoint", ["cli", "claude-vscode", "claude-desktop", None])
def test_interactive_claude_entrypoints_reflect(tmp_path: Path, entrypoint: str | None) -> None:
    extra = {"entrypoint": entrypoint} if entrypoint else {}
    path = write_jsonl(tmp_path / "x.jsonl", [cc_user(CORRECTION, **extra)])
    assert _verdict(path).reason == "has_signal"


def test_subagent_transcript_is_not_interactive(tmp_path: Path) -> None:
    # <session>/subagents/agent-<id>.jsonl, named anything: the records say what it is.
    recs = [
        cc_user(CORRECTION, isSidechain=True, agentId="a1b2c3", entrypoint="cli"),
        cc_assistant("The root cause was a missing index.", isSidechain=True, agentId="a1b2c3"),
    ]
    t = read_transcript(write_jsonl(tmp_path / "session.jsonl", recs))
    assert "subagent" in t.not_interactive and t.turns == []
    assert gate(t, detect_signals(t.turns)).reason == "not_interactive"


def test_compaction_agent_is_not_interactive(tmp_path: Path) -> None:
    prompt = (
        "Your task is to create a detailed summary of the conversation so far, paying close "
        "attention to the user's explicit requests and your previous actions.\n"
        "Include every correction: 'No, never use var'."
    )
    recs = [cc_user(prompt, entrypoint="cli"), cc_assistant("<summary>…</summary>")]
    t = read_transcript(write_jsonl(tmp_path / "agent-acompact-1.jsonl", recs))
    assert "compaction" in t.not_interactive
    assert gate(t, detect_signals(t.turns)).reason == "not_interactive"


def test_person_quoting_the_compaction_prompt_later_is_interactive(tmp_path: Path) -> None:
    recs = [
        cc_user(CORRECTION),
        cc_user("Your task is to create a detailed summary of the changes, never skip tests."),
    ]
    assert _verdict(write_jsonl(tmp_path / "x.jsonl", recs)).reason == "has_signal"


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({"originator": "codex_exec", "source": "exec"}, "codex_exec"),
        ({"originator": "some_wrapper", "source": "exec"}, "source exec"),
        ({"originator": "codex_cli_rs", "source": "mcp"}, "source mcp"),
        ({"originator": "codex_cli_rs", "source": {"subagent": "review"}}, "subagent"),
        ({"originator": "codex_cli_rs", "source": "cli", "thread_source": "subagent"}, "subagent"),
    ],
)
def test_headless_codex_is_not_interactive(tmp_path: Path, meta: dict, why: str) -> None:
    recs = [cx_meta(**meta), *cx_typed(CORRECTION), cx_msg("assistant", "Done.")]
    t = read_transcript(write_jsonl(tmp_path / "rollout.jsonl", recs))
    assert why in t.not_interactive
    assert gate(t, detect_signals(t.turns)).reason == "not_interactive"


@pytest.mark.parametrize(
    "meta",
    [
        {"originator": "codex_cli_rs", "source": "cli"},
        {"originator": "codex_vscode", "source": "vscode"},
        {"originator": "Codex Desktop", "source": "vscode", "thread_source": "user"},
        {},
    ],
)
def test_interactive_codex_reflects(tmp_path: Path, meta: dict) -> None:
    recs = [cx_meta(**meta), *cx_typed(CORRECTION)]
    assert _verdict(write_jsonl(tmp_path / "rollout.jsonl", recs)).reason == "has_signal"


def test_prepare_skips_headless_for_free_and_says_why(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [cc_user(CORRECTION, entrypoint="sdk-cli")])
    out = prepare(read_transcript(path), EmptyLedger(), source_name=str(path))
    assert (out.action, out.reason, out.slice_text) == ("skip", "not_interactive", "")
    assert out.signal_count > 0 and "sdk-cli" in out.detail


def test_only_the_first_dialogue_record_decides(tmp_path: Path) -> None:
    # A person's session later resumed through the SDK stays the person's session.
    recs = [cc_user(CORRECTION, entrypoint="cli"), cc_user("ok", entrypoint="sdk-cli")]
    assert read_transcript(write_jsonl(tmp_path / "x.jsonl", recs)).not_interactive == ""
