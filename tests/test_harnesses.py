"""The harness registry: one record per harness, read by the hook, install, doctor, backfill
and the transcript reader, and cheap enough for the hook to import after every agent turn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reflect_jobs import harnesses
from reflect_jobs import install as inst
from reflect_jobs.backfill import default_root, find_transcripts
from reflect_jobs.hook import HookInputError, first_given, parse_payload
from reflect_jobs.transcripts.reader import parser_for


def test_the_hook_imports_the_registry_but_no_parser_and_no_dataclasses(env):
    code = (
        "import sys, reflect_jobs.hook\n"
        "assert 'reflect_jobs.harnesses' in sys.modules\n"
        "bad = [m for m in sys.modules if m.startswith('reflect_jobs.transcripts')"
        " or m in ('dataclasses', 'inspect', 'typing')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], env=dict(env), check=True)


def test_records_are_frozen_values():
    with pytest.raises(AttributeError, match="frozen"):
        harnesses.CLAUDE.name = "other"  # type: ignore[misc]
    assert harnesses.CLAUDE.replace() == harnesses.CLAUDE
    assert harnesses.CLAUDE.replace(label="x") != harnesses.CLAUDE
    assert harnesses.HookEvent("Stop", 5) == harnesses.HookEvent(name="Stop", timeout_sec=5)
    with pytest.raises(TypeError, match="missing fields timeout_sec"):
        harnesses.HookEvent("Stop")
    with pytest.raises(TypeError, match="unexpected"):
        harnesses.HookEvent("Stop", 5, colour="red")


def test_names_aliases_and_lookups():
    assert harnesses.NAMES == ("claude", "codex", "copilot")
    assert harnesses.resolve("claude-code") == harnesses.resolve("claude_code") == "claude"
    assert harnesses.resolve("copilot-cli") == "copilot" and harnesses.resolve("gemini") is None
    with pytest.raises(KeyError, match="expected one of claude, codex, copilot"):
        harnesses.get("claude-code")  # the hook takes short names only


@pytest.mark.parametrize("name", harnesses.NAMES)
def test_every_record_is_complete_and_its_parser_imports(name):
    spec = harnesses.get(name)
    assert spec.event_names and all(e.timeout_sec > 0 for e in spec.events)
    assert spec.transcripts.session_id in harnesses.SESSION_ID_SCHEMES
    assert all(spec.payload.transcript_path) and spec.command_key in harnesses.COMMAND_KEYS
    parse = parser_for(name)
    assert parse.__module__ == spec.parser.split(":")[0] and callable(parse)


def test_install_and_doctor_follow_the_registry(tmp_path, monkeypatch):
    """The registry is the one place to change a harness: a new event and timeout there is
    what install writes and what doctor then expects."""
    from reflect_jobs.doctor_hooks import check_hooks

    environ = {"CODEX_HOME": str(tmp_path / "cx"), "HOME": str(tmp_path)}
    path = inst.default_settings_path("codex", environ)
    assert path == tmp_path / "cx" / "hooks.json"
    command = inst.hook_command("codex")
    inst.apply_hooks(path, "codex", command=command)  # as the registry has it today

    def doctor() -> dict:
        return next(c for c in check_hooks(environ) if c["name"] == "hooks (codex)")

    assert doctor()["ok"], doctor()
    # SessionStart prints the recall context (ARCHITECTURE §13): install writes it like any
    # other event, doctor expects it, and the hook captures nothing on it
    hooks = json.loads(path.read_text())["hooks"]
    assert list(hooks) == ["PreCompact", "Stop", "SessionEnd", "SessionStart"]
    assert hooks["SessionStart"] == [
        {"hooks": [{"type": "command", "command": f"{command} --event SessionStart", "timeout": 5}]}
    ]
    assert hooks["Stop"][0]["hooks"][0]["timeout"] == 5
    assert hooks["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    assert doctor()["ok"], doctor()
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    payload = json.dumps({"session_id": "s", "transcript_path": str(transcript)})
    assert parse_payload(payload, "codex", "SessionStart") is None
    assert parse_payload(payload, "codex", "Stop") == ("s", str(transcript), "Stop", None)
    assert default_root("codex", environ) == tmp_path / "cx" / "sessions"


def test_the_hook_reads_the_payload_keys_of_its_harness(tmp_path, monkeypatch):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    payload = json.dumps({"sessionId": "s1", "transcriptPath": str(transcript), "cwd": "/"})
    assert parse_payload(payload, "copilot") == ("s1", str(transcript), "unknown", "/")
    keys = harnesses.COPILOT.payload.replace(transcript_path=("agentTranscriptPath",))
    copilot = harnesses.COPILOT.replace(payload=keys, transcript_files=())
    monkeypatch.setitem(harnesses.REGISTRY, "copilot", copilot)
    with pytest.raises(HookInputError, match="no transcript_path"):
        parse_payload(payload, "copilot")
    snake = json.dumps({"session_id": "s1", "transcript_path": str(transcript)})
    assert parse_payload(snake, "claude")[1] == str(transcript), "other harnesses unchanged"
    with pytest.raises(HookInputError, match="no transcript_path"):
        parse_payload(payload, "claude")  # Claude Code never sends camelCase keys


def test_backfill_names_sessions_by_the_layout_scheme(tmp_path):
    uuid = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    files = {
        "claude": tmp_path / "projects" / "p" / "abc.jsonl",
        "codex": tmp_path / "sessions" / "2026" / f"rollout-2026-01-01T00-00-00-{uuid}.jsonl",
        "copilot": tmp_path / "session-state" / "sess-9" / "events.jsonl",
    }
    for f in files.values():
        f.parent.mkdir(parents=True)
        f.write_text("{}\n")
    want = {"claude": "abc", "codex": uuid, "copilot": "sess-9"}
    for name, f in files.items():
        root = Path(tmp_path / harnesses.get(name).transcripts.root)
        (found,) = find_transcripts(root, name, None)
        assert (found.path, found.session_id) == (str(f), want[name])


def test_null_and_empty_values_count_as_absent():
    """Codex sends ``"agent_transcript_path": null``; a present but empty value must not
    hide a later key (the original's presence rule did)."""
    assert first_given({"a": None, "b": "x"}, "a", "b") == "x"
    assert first_given({"a": "", "b": "x"}, "a", "b") == "x"
    assert first_given({"a": "  ", "b": None}, "a", "b", default="d") == "d"
    assert first_given({"a": 0, "b": "x"}, "a", "b") == 0, "a falsy non-empty value counts"


def test_the_registry_is_the_contract_docs_harnesses_md_states():
    """Events, timeouts and payload keys as each harness documents them (docs/HARNESSES.md
    names the sources): Codex caps SessionEnd at 3 s, Claude Code raises its 1.5 s budget to
    at most 60 s, Copilot CLI defaults every hook to 30 s."""
    got = {
        h.name: {e.name: (e.timeout_sec, e.max_timeout_sec, e.role) for e in h.events}
        for h in harnesses.REGISTRY.values()
    }
    assert got == {
        "claude": {"PreCompact": (5, None, "capture"), "Stop": (5, None, "capture"),
                   "SessionEnd": (3, 60, "capture"), "SessionStart": (5, None, "context")},
        "codex": {"PreCompact": (5, None, "capture"), "Stop": (5, None, "capture"),
                  "SessionEnd": (3, 3, "capture"), "SessionStart": (5, None, "context")},
        "copilot": {"preCompact": (5, None, "capture"), "agentStop": (5, None, "capture"),
                    "sessionEnd": (3, None, "capture"), "sessionStart": (5, None, "context")},
    }  # fmt: skip
    for h in harnesses.REGISTRY.values():
        assert not {"agent_transcript_path", "agentTranscriptPath"} & set(h.payload.transcript_path)
        assert {"SubagentStop"} <= set(h.ignored_events) or {"subagentStop"} <= set(
            h.ignored_events
        )
        assert not set(h.event_names) & set(h.ignored_events)
    environ = {"COPILOT_HOME": "/c", "HOME": "/h"}
    assert harnesses.transcript_candidates(harnesses.COPILOT, "s-1", environ) == [
        "/c/session-state/s-1/events.jsonl",
        "/c/session-state/s-1.jsonl",
    ]
    assert harnesses.home_of(harnesses.COPILOT, {"HOME": "/h"}) == "/h/.copilot"
    for bad in ("", "unknown", "..", ".hidden", "a/b", "a\\b", "x\x00"):
        with pytest.raises(ValueError, match="cannot name a transcript file"):
            harnesses.transcript_candidates(harnesses.COPILOT, bad, environ)
    assert harnesses.transcript_candidates(harnesses.CLAUDE, "../x", environ) == []


def test_an_older_install_without_event_still_never_captures_a_subagent(tmp_path):
    """Until ``install hooks`` runs again, the hook may still be wired on SubagentStop with
    no ``--event``: the payload's own event name keeps it from capturing."""
    parent, child = tmp_path / "p.jsonl", tmp_path / "p" / "subagents" / "agent-a.jsonl"
    child.parent.mkdir(parents=True)
    parent.write_text("{}\n")
    child.write_text("{}\n")
    payload = {"session_id": "p", "transcript_path": str(parent), "hook_event_name": "Stop"}
    sub = {**payload, "hook_event_name": "SubagentStop", "agent_id": "a"}
    sub["agent_transcript_path"] = str(child)
    assert parse_payload(json.dumps(sub), "claude") is None
    assert parse_payload(json.dumps(payload), "claude") == ("p", str(parent), "Stop", None)
