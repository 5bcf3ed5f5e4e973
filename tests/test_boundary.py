"""The data boundary (REFLECT_BOUNDARY_CMD): a restricted session ends skip_restricted at $0,
before prepare reads its transcript, and nothing of it — slice, excerpt, note, item — is
written. Real scripts as the command, the real CLI, a real Huey consumer, the stub claude."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from support import BIN, write_claude_transcript

from reflect_jobs import boundary
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow, Job

CORRECTION = "No, never use a bare except in this codebase; catch KeyError."


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time, subprocess\n{body}\n")
    path.chmod(0o700)
    return path


def _calls(env) -> int:  # type: ignore[no-untyped-def]
    p = env["STUB_CLAUDE_LOG"]
    return len(Path(p).read_text().splitlines()) if os.path.exists(p) else 0


def _run_one(env, t: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    env.invoke("enqueue", str(t), "--session-id", "sess-b")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    return job


def _assert_nothing_written(env, job) -> None:  # type: ignore[no-untyped-def]
    assert (job["stage"], job["state"], job["outcome"]) == ("done", "done", "skip_restricted")
    assert _calls(env) == 0, "no model call"
    slices = env.home / "slices"
    assert not (slices.exists() and list(slices.iterdir())), "no slice file"
    docs = env.kb / "documents"
    assert not (docs.exists() and list(docs.iterdir())), "no note"
    assert not list(env.kb.rglob("*.jsonl")), "no reflection item"
    with session_scope(env.settings().db_url) as s:
        rows = s.scalars(select(CostRow)).all()
        # The $0 row every free outcome gets (so `cost` shows every run); nothing paid.
        assert [(r.outcome, r.entries, r.tokens or 0) for r in rows] == [("skip_restricted", 0, 0)]
        row = s.get(Job, job["id"])
        assert row is not None and not row.prepare_stats, "the cascade never read the transcript"
        assert row.slice_path is None


@pytest.mark.parametrize(
    "case",
    # "hangs": the command's process group is killed on timeout, a kill, so chaos-marked
    ["restricts", "missing", "fails", pytest.param("hangs", marks=pytest.mark.chaos)],
)
def test_restricted_session_ends_skip_restricted_and_writes_nothing(env, tmp_path, case):
    t = write_claude_transcript(tmp_path / "t.jsonl", [CORRECTION])
    seen = tmp_path / "stdin.json"
    child_pid = tmp_path / "child.pid"
    if case == "restricts":
        cmd = str(
            _script(
                tmp_path / "b",
                f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n"
                f"open({str(seen)!r} + '.env', 'w').write(json.dumps(dict(os.environ)))\n"
                "sys.exit(1)",
            )
        )
    elif case == "missing":
        cmd = str(tmp_path / "no-such-boundary")
    elif case == "fails":
        cmd = str(_script(tmp_path / "b", "raise SystemExit('boom')"))
    else:  # a wrapper whose child would outlive it: the whole group is killed at 1 s
        body = (
            "p = subprocess.Popen(['sleep', '60'])\n"
            f"open({str(child_pid)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(60)"
        )
        cmd = str(_script(tmp_path / "b", body))
    env.update(
        REFLECT_BOUNDARY_CMD=cmd,
        REFLECT_BOUNDARY_TIMEOUT_SEC="1",
        REFLECT_OPENAI_API_KEY="sk-test-not-for-the-boundary",
    )
    job = _run_one(env, t)
    _assert_nothing_written(env, job)
    if case == "restricts":
        assert json.loads(seen.read_text()) == {
            "harness": "claude",
            "session_id": "sess-b",
            "transcript_path": str(t),
            "cwd": str(tmp_path),
        }
        child_env = json.loads(Path(f"{seen}.env").read_text())
        assert child_env["REFLECT_DRAIN_CHILD"] == "1", "the child guard is set"
        assert "REFLECT_OPENAI_API_KEY" not in child_env, "our API key is withheld"
    if case == "hangs":
        pid = int(child_pid.read_text())
        try:
            os.kill(pid, 0)
            alive = Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except ProcessLookupError:
            alive = False
        assert not alive, "the command's process group was killed on timeout"


def test_allowed_session_goes_on_to_the_model(env, tmp_path):
    t = write_claude_transcript(tmp_path / "t.jsonl", [CORRECTION])
    cmd = _script(tmp_path / "allow", "json.load(sys.stdin)\nsys.exit(0)")
    env.update(REFLECT_BOUNDARY_CMD=f"{cmd} --flag")
    job = _run_one(env, t)
    assert job["outcome"] == "ok" and _calls(env) == 1


def test_check_reasons_fail_closed(tmp_path):
    payload = boundary.request("claude", "s", str(tmp_path / "x.jsonl"))
    assert payload["cwd"] == str(tmp_path)
    assert boundary.check("", payload) == boundary.Verdict(False, "empty command")
    assert boundary.check("'unclosed", payload).allowed is False
    exit2 = _script(tmp_path / "e2", "sys.exit(2)")
    assert boundary.check(str(exit2), payload) == boundary.Verdict(False, "exit 2")
    # exits 0 without reading stdin: still allowed (a broken pipe is not a verdict)
    ok = _script(tmp_path / "ok", "sys.exit(0)")
    assert boundary.check(str(ok), payload).allowed is True


def test_a_dry_run_asks_the_boundary_too_and_moves_nothing(env, tmp_path):
    t = write_claude_transcript(tmp_path / "t.jsonl", [CORRECTION])
    asked = tmp_path / "asked"
    cmd = _script(tmp_path / "b", f"open({str(asked)!r}, 'w').write('1')\nsys.exit(1)")
    env.update(REFLECT_BOUNDARY_CMD=str(cmd), REFLECT_DRAIN_DRY_RUN="1")
    env.invoke("enqueue", str(t), "--session-id", "dry")
    env.invoke("drain", "--until-idle", "--max-seconds", "30")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert job["state"] == "queued" and job["outcome"] is None and asked.exists()
    lines = [json.loads(x) for x in (env.home / "drain.log").read_text().splitlines() if x]
    dry = [x for x in lines if x.get("event") == "dry run: prepare"]
    assert dry and all(x.get("reason") == "restricted" for x in dry)
    assert _calls(env) == 0


def test_the_hook_payloads_cwd_reaches_the_boundary(env, tmp_path):
    """A hook capture tells the boundary the session's working directory (the payload's
    ``cwd``, carried on the queue message, the spool entry and the job), not the
    transcript's directory, so a command can decide by repository."""
    t = write_claude_transcript(tmp_path / "t.jsonl", [CORRECTION])
    repo = tmp_path / "work" / "secret-repo"
    repo.mkdir(parents=True)
    seen = tmp_path / "stdin.json"
    cmd = _script(
        tmp_path / "b",
        f"req = json.load(sys.stdin)\nopen({str(seen)!r}, 'w').write(json.dumps(req))\n"
        "sys.exit(1 if req['cwd'].endswith('secret-repo') else 0)",
    )
    env.update(REFLECT_BOUNDARY_CMD=str(cmd))
    payload = {
        "session_id": "sess-h",
        "transcript_path": str(t),
        "cwd": str(repo),
        "hook_event_name": "SessionEnd",
    }
    hook = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert hook.returncode == 0, hook.stderr
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    _assert_nothing_written(env, job)
    assert json.loads(seen.read_text())["cwd"] == str(repo)
    with session_scope(env.settings().db_url) as s:
        row = s.get(Job, job["id"])
        assert row is not None and row.cwd == str(repo)
