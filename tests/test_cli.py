"""The operator CLI: stable JSON shapes (ARCHITECTURE §9), exit codes, logging, graceful worker stop."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from support import (
    BIN,
    hang_first_model_call,
    job_state,
    lease_expired,
    transcripts_dir,
    wait_for,
    write_claude_transcript,
)

JOB_KEYS = {
    "id",
    "harness",
    "session_id",
    "transcript_path",
    "stage",
    "state",
    "outcome",
    "attempts",
    "created_at",
    "updated_at",
    "next_run_at",
}


def test_status_json_shape_on_a_fresh_install(env):
    data = json.loads(env.invoke("status", "--json").stdout)
    assert set(data) >= {
        "counts",
        "budget",
        "run_window",
        "quota",
        "halted",
        "last_success_at",
        "warnings",
    }
    assert set(data["budget"]) == {"day", "used", "limit"} and data["budget"]["limit"] == 20
    assert set(data["run_window"]) == {"used", "limit", "resets_at"}
    assert data["quota"]["gate"] == "open" and data["halted"] is False
    assert all(v == 0 for v in data["counts"].values())
    assert "reflect idle budget 0/20" in env.invoke("status", "--line").stdout


def test_jobs_show_and_cost_json_shapes(env):
    job_id = env.invoke(
        "enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl")
    ).stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert set(job) >= JOB_KEYS and job["id"] == job_id
    assert json.loads(env.invoke("jobs", "--state", "poisoned", "--json").stdout) == []
    cost = json.loads(env.invoke("cost", "--by", "outcome", "--json").stdout)
    assert cost["by"] == "outcome" and set(cost["rows"]["ok"]) >= {
        "runs",
        "entries",
        "tokens",
        "cost_usd",
    }
    assert cost["total"]["tokens"] == 14210 + 412 + 3120
    hits = json.loads(env.invoke("search", "pnpm", "--json", "--mode", "lexical").stdout)["results"]
    assert set(hits[0]) == {"id", "title", "score", "path"}
    assert "running" in env.invoke("show", job_id).stdout


def test_usage_errors_exit_2_and_handled_failures_exit_1(env):
    assert env.invoke("retry", check=False).returncode == 2
    assert env.invoke("show", "nope", check=False).returncode == 1
    assert env.invoke("enqueue", "/no/such/file.jsonl", check=False).returncode == 2
    proc = env.invoke("show", "nope", check=False)
    assert proc.stderr.strip().count("\n") == 0 and "no job nope" in proc.stderr


def test_drain_log_is_json_lines_with_transitions_and_rotates(env, tmp_path):
    env["REFLECT_DRAIN_LOG_MAX_BYTES"] = "2048"
    for i in range(3):
        t = write_claude_transcript(
            tmp_path / f"l{i}.jsonl",
            [f"No, never hardcode port {8000 + i}; read it from the config."],
        )
        env.invoke("enqueue", str(t), "--session-id", f"log{i}")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert (env.home / "drain.log.1").exists(), "rotated at REFLECT_DRAIN_LOG_MAX_BYTES"
    lines = [
        json.loads(x)
        for p in ("drain.log.1", "drain.log")
        for x in (env.home / p).read_text().splitlines()
    ]
    transitions = [x for x in lines if x.get("event") == "transition"]
    assert transitions and all(
        {"job_id", "stage", "state", "outcome"} <= set(x) for x in transitions
    )


def test_db_upgrade_reports_head(env):
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from reflect_jobs.ledger.db import migrations_dir

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    out = env.invoke("db", "upgrade").stdout
    assert f"at revision {head} (head {head})" in out


@pytest.mark.chaos
def test_worker_restarts_recover_a_killed_job_and_stop_gracefully_on_sigterm(env, tmp_path):
    t = write_claude_transcript(
        tmp_path / "w.jsonl", ["No, always validate the webhook signature first."]
    )
    hang_first_model_call(env, tmp_path, lease_sec=3)
    job_id = env.invoke("enqueue", str(t)).stdout.strip()

    def start():
        return subprocess.Popen(
            [str(BIN / "reflect-jobs"), "worker", "-w", "2"],
            env=dict(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    first = start()
    wait_for(lambda: (tmp_path / "claude-calls.jsonl").exists(), timeout=60)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    db = env.settings().db_url
    assert job_state(db, job_id) == "running"
    wait_for(lambda: lease_expired(db, job_id), timeout=60, what="the dead worker's lease expiring")
    second = start()  # start-up recovery re-queues the expired lease
    try:
        wait_for(
            lambda: json.loads(env.invoke("jobs", "--json").stdout)[0]["state"] == "done",
            timeout=60,
        )
    finally:
        second.send_signal(signal.SIGTERM)
        rc = second.wait(30)
    assert rc == 0
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert shown["outcome"] == "ok" and shown["recoveries"] == 1
