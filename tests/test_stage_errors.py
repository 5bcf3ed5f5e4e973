"""An exception inside a stage ends the attempt at once (``pipeline/runtime.py:stage_failed``).

Before, Huey logged the exception and the ledger kept the job ``running`` until its lease
expired — four times, ~24 minutes at the default lease, ``drain --until-idle`` blocked all
along — and then poisoned it as ``poison_crash_loop`` with an empty error. These tests run
the real drain (a Huey consumer in a subprocess) with ``--max-seconds`` far above what a
healthy run needs: before the fix each of them ended with the job still ``running``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import BIN, write_claude_transcript

from reflect_jobs.ledger import admin


def _jobs(env) -> list[dict]:
    return admin.list_jobs(env.settings().db_url)


def _calls(env) -> int:
    p = Path(env["STUB_CLAUDE_LOG"])
    return len(p.read_text().splitlines()) if p.exists() else 0


def _errors(env) -> list[dict]:
    return admin.list_errors(env.settings().db_url)


def _show(env, job_id: str) -> dict:
    return admin.job_detail(env.settings().db_url, job_id)


def _drain(env, **extra: str) -> None:
    proc = subprocess.run(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "60"],
        env=dict(env, **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-1500:]


def _transcript(tmp_path: Path) -> Path:
    return write_claude_transcript(
        tmp_path / "t.jsonl", ["No, never swallow exceptions in the worker; log and re-raise."]
    )


@pytest.mark.chaos
def test_a_deterministic_stage_error_poisons_at_once_with_its_error_recorded(env, tmp_path):
    job_id = env.cli("enqueue", str(_transcript(tmp_path))).stdout.strip()
    _drain(env, REFLECT_FAILPOINTS="after_claim:add=raise")
    (job,) = _jobs(env)
    assert (job["stage"], job["state"], job["outcome"]) == ("add", "poisoned", "poison_stage_error")
    shown = _show(env, job_id)
    assert shown["recoveries"] == 0, "ended by the error, not by a lease expiry"
    last = shown["events"][-1]
    assert (
        last["to"] == "poisoned" and "FailpointError: failpoint after_claim:add" in last["detail"]
    )
    (err,) = [e for e in _errors(env) if e["kind"] == "stage_error"]
    assert err["severity"] == "error" and "FailpointError" in err["message"]
    # A person's retry finishes it from the stored plan: no second model call, outcome ok.
    env.cli("retry", job_id)
    _drain(env)
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    assert _calls(env) == 1
    assert len(list((env.kb / "documents").glob("*.md"))) == 1


@pytest.mark.chaos
def test_a_transient_error_after_the_paid_answer_retries_and_reuses_it(env, tmp_path):
    job_id = env.cli("enqueue", str(_transcript(tmp_path))).stdout.strip()
    # EIO right after the answer was recorded: the next attempt must not call again.
    _drain(env, REFLECT_FAILPOINTS="after_record=oserror:EIO")
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    assert _calls(env) == 1, "the recorded answer was reused, never paid twice"
    assert [c["entries"] for c in _show(env, job_id)["costs"]] == [1]
    shown = _show(env, job_id)
    retried = [e for e in shown["events"] if e["to"] == "retrying"]
    assert [e["outcome"] for e in retried] == ["fail_stage_error"]
    assert "OSError" in retried[0]["detail"] and shown["recoveries"] == 0
    assert any(e["kind"] == "stage_error" and e["severity"] == "warn" for e in _errors(env))


def test_a_lone_surrogate_in_the_model_answer_is_stored_not_fatal(env, tmp_path):
    actions = {
        "actions": [
            {
                "action": "CREATE",
                "reason": "r",
                "learning": {
                    "title": "Bad \ud800 title",
                    "category": "Tools",
                    "key_insight": "k \ud800",
                    "rule": "Always log and re-raise",
                    "confidence_num": 0.9,
                    "tags": ["t\ud800"],
                    "body": "b",
                    "evidence": "never swallow exceptions in the worker",
                },
            }
        ]
    }
    # json.dumps writes the lone surrogate as the escape "\ud800", as a model's JSON would.
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(actions))
    env.invoke("enqueue", str(_transcript(tmp_path)))
    _drain(env)
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    (note,) = (env.kb / "documents").glob("*.md")
    assert "Bad \ufffd title" in note.read_text(encoding="utf-8")


def test_a_transcript_line_of_deeply_nested_brackets_counts_as_malformed(env, tmp_path):
    t = _transcript(tmp_path)
    with t.open("a", encoding="utf-8") as fh:
        fh.write("[" * 100_000 + "\n")
    env.invoke("enqueue", str(t))
    _drain(env)
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job


def test_a_session_id_with_nul_is_captured(env, tmp_path):
    payload = {
        "session_id": "ab\x00cd",
        "transcript_path": str(_transcript(tmp_path)),
        "hook_event_name": "Stop",
    }
    env.run("reflect-jobs-hook", "claude", input=json.dumps(payload))
    _drain(env)
    (job,) = _jobs(env)
    assert (job["session_id"], job["state"], job["outcome"]) == ("abcd", "done", "ok"), job
