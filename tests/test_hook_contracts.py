"""Each harness's hook contract, end to end: the payloads as the harnesses document them
(docs/HARNESSES.md names the source of each), fed to the real ``reflect-jobs-hook`` the way
the installed command runs it, then drained, asserting the transcript the session's job reads.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from sqlalchemy import select
from support import BIN, DATA, transcripts_dir

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job

HOOK = str(BIN / "reflect-jobs-hook")


def _hook(env, harness: str, event: str, payload: dict) -> subprocess.CompletedProcess:
    """Run the hook as ``install hooks`` wires it: ``<hook> HARNESS --event EVENT``."""
    proc = subprocess.run(
        [HOOK, harness, "--event", event],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc
    return proc


def _jobs_after_drain(env) -> dict[str, Job]:
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"  # keep the jobs settling: we read captures
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    with session_scope(env.settings().db_url) as s:
        jobs = s.scalars(select(Job)).all()
        for j in jobs:
            s.expunge(j)
    return {j.session_id: j for j in jobs}


def _errors(env) -> list[str]:
    log = env.home / "hook-errors.log"
    return [json.loads(x)["error"] for x in log.read_text().splitlines()] if log.exists() else []


def _copy(src: Path, dst: Path) -> str:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return str(dst)


def test_claude_subagent_stop_never_replaces_the_parent_transcript(env, tmp_path):
    """SubagentStop carries the parent's session_id and the subagent's own
    agent_transcript_path (code.claude.com/docs/en/hooks, "SubagentStop input"): the parent's
    job must keep the parent's transcript, however the events interleave."""
    sid = "abc123"
    project = tmp_path / "claude" / "projects" / "-home-user-proj"
    parent = _copy(transcripts_dir() / "coverage-test-fix.jsonl", project / f"{sid}.jsonl")
    child = _copy(
        transcripts_dir() / "hello-world-script.jsonl",
        project / sid / "subagents" / "agent-def456.jsonl",
    )
    common = {"session_id": sid, "transcript_path": parent, "cwd": str(tmp_path)}
    _hook(env, "claude", "Stop", {**common, "hook_event_name": "Stop", "stop_hook_active": False})
    # a hook fired inside the subagent (agent_id set) is the subagent's, not the session's;
    # the SubagentStop comes last, where it used to leave its own path on the parent's job
    pre_compact = {**common, "hook_event_name": "PreCompact", "trigger": "auto"}
    _hook(env, "claude", "PreCompact", {**pre_compact, "agent_id": "def456"})
    subagent_stop = {
        **common,
        "permission_mode": "default",
        "hook_event_name": "SubagentStop",
        "stop_hook_active": False,
        "agent_id": "def456",
        "agent_type": "Explore",
        "agent_transcript_path": child,
        "last_assistant_message": "Analysis complete. Found 3 potential issues...",
        "background_tasks": [],
        "session_crons": [],
    }
    _hook(env, "claude", "SubagentStop", subagent_stop)
    jobs = _jobs_after_drain(env)
    assert list(jobs) == [sid]
    assert jobs[sid].transcript_path == parent and jobs[sid].captures == 1
    assert jobs[sid].event == "Stop" and _errors(env) == []


def test_codex_session_end_and_null_fields(env, tmp_path):
    """Codex sends every transcript path as string-or-null and wires SessionEnd since
    0.145.0 (openai/codex codex-rs/hooks/schema/generated/*.command.input.schema.json)."""
    sid = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    rollout = _copy(
        DATA / "transcripts" / "codex-rollout.jsonl",
        tmp_path
        / "codex"
        / "sessions"
        / "2026"
        / "12"
        / "01"
        / f"rollout-2026-12-01T10-00-00-{sid}.jsonl",
    )
    base = {"session_id": sid, "transcript_path": rollout, "cwd": str(tmp_path), "model": "gpt-5"}
    subagent_stop = {
        **base,
        "turn_id": "t2",
        "hook_event_name": "SubagentStop",
        "permission_mode": "default",
        "stop_hook_active": False,
        "agent_id": "0199a213-0000-7000-8000-000000000002",
        "agent_type": "worker",
        "agent_transcript_path": None,
        "last_assistant_message": None,
    }
    _hook(env, "codex", "SubagentStop", subagent_stop)
    end = {**base, "hook_event_name": "SessionEnd", "reason": "other"}
    _hook(env, "codex", "SessionEnd", end)
    # an ephemeral session has no rollout: transcript_path null is "no transcript", logged
    _hook(env, "codex", "Stop", {**base, "session_id": "eph", "transcript_path": None})
    jobs = _jobs_after_drain(env)
    assert list(jobs) == [sid]
    assert (jobs[sid].transcript_path, jobs[sid].event, jobs[sid].captures) == (
        rollout,
        "SessionEnd",
        1,
    )
    assert _errors(env) == ["HookInputError: payload has no transcript_path"]


def test_copilot_session_end_derives_the_transcript_from_the_session_id(env, tmp_path):
    """Copilot CLI's camelCase sessionEnd payload is sessionId, timestamp (ms), cwd, reason —
    no transcriptPath and no event name (docs.github.com …/cli-hooks-reference)."""
    home = tmp_path / "copilot-home"
    env["COPILOT_HOME"] = str(home)
    events = DATA / "transcripts" / "copilot-events.jsonl"
    current = _copy(events, home / "session-state" / "s-current" / "events.jsonl")
    legacy = _copy(events, home / "session-state" / "s-legacy.jsonl")
    end = {"timestamp": 1704618000000, "cwd": str(tmp_path), "reason": "complete"}
    # as Copilot runs it: the command install wrote under sessionEnd, through a shell
    env["HOME"] = str(tmp_path / "user")
    env.invoke("install", "hooks", "--harness", "copilot")
    installed = json.loads((home / "hooks" / "reflect-jobs.json").read_text())
    (entry,) = installed["hooks"]["sessionEnd"]
    assert entry["timeoutSec"] == 3 and entry["bash"].endswith(" copilot --event sessionEnd")
    proc = subprocess.run(
        entry["bash"],
        shell=True,
        input=json.dumps({"sessionId": "s-current", **end}).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc
    _hook(env, "copilot", "sessionEnd", {"sessionId": "s-legacy", **end})
    _hook(env, "copilot", "sessionEnd", {"sessionId": "../../etc/passwd", **end})
    _hook(env, "copilot", "sessionEnd", {"sessionId": "s-gone", **end})
    # agentStop names its transcript; a null in a preferred key does not hide the next one
    stop = {"sessionId": "s-stop", "timestamp": 1704614400000, "cwd": str(tmp_path)}
    _hook(env, "copilot", "agentStop", {**stop, "transcriptPath": None, "transcript_path": current})
    _hook(env, "copilot", "subagentStop", {**stop, "transcriptPath": current, "agentName": "x"})
    jobs = _jobs_after_drain(env)
    assert {k: (j.transcript_path, j.event) for k, j in jobs.items()} == {
        "s-current": (current, "sessionEnd"),
        "s-legacy": (legacy, "sessionEnd"),
        "s-stop": (current, "agentStop"),
    }
    errors = _errors(env)
    assert len(errors) == 2
    assert "cannot name a transcript file" in errors[0]
    assert errors[1] == (
        "HookInputError: transcript not found: "
        f"{home / 'session-state' / 's-gone' / 'events.jsonl'}"
    )
