"""Problems show up where people look: hook failures and the running worker's configuration.

A hook failure used to reach only ``hook-errors.log``; a second worker on one home started
silently; ``doctor`` described the shell, not the worker. Real hook processes and real
``reflect-jobs worker`` processes here; ``status``/``errors``/``doctor`` are read as a person
runs them.
"""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner
from support import BIN, running_worker, wait_for

from reflect_jobs import hook_errors
from reflect_jobs.cli import main


def _run(env, *args: str):  # type: ignore[no-untyped-def]
    out = CliRunner().invoke(main, list(args), env=dict(env))
    return out


def _hook(env, payload: str) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude", "--event", "Stop"],
        input=payload,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""


def test_hook_errors_are_counted_listed_and_checked(env, tmp_path):
    _hook(env, "{not json")
    _hook(env, json.dumps({"session_id": "s", "transcript_path": str(tmp_path / "gone.jsonl")}))
    _hook(env, json.dumps({"session_id": "s", "transcript_path": str(tmp_path / "gone.jsonl")}))
    # an old line (two days ago) is history, not news
    log = env.home / "hook-errors.log"
    old = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    log.write_text(json.dumps({"ts": old, "error": "ancient"}) + "\n" + log.read_text())

    status = json.loads(_run(env, "status", "--json").stdout)
    assert status["hook_errors"] == 3
    assert "3 hook error(s) in the last 24 h" in " ".join(status["warnings"])

    rows = json.loads(_run(env, "errors", "--json").stdout)
    hook_rows = [r for r in rows if r["source"] == "hook"]
    assert sorted((r["count"], r["message"].split(":")[0]) for r in hook_rows) == [
        (1, "HookInputError"),
        (2, "HookInputError"),
    ]
    assert all(r["id"].startswith("hook-") for r in hook_rows)
    assert "ancient" not in json.dumps(rows)
    text = _run(env, "errors").stdout
    assert "transcript not found" in text
    ack = _run(env, "errors", "--ack", hook_rows[0]["id"])
    assert ack.exit_code == 1 and "cannot be acknowledged" in ack.output

    doctor = {c["name"]: c for c in json.loads(_run(env, "doctor", "--json").stdout)}
    check = doctor["hook errors"]
    assert not check["ok"] and check["detail"].startswith("3 in the last 24 h, newest: ")
    assert "transcript not found" in check["detail"] and "reflect-jobs errors" in check["fix"]

    from reflect_jobs.dashboard.data import newest_errors

    assert {r["source"] for r in newest_errors(env.settings())} == {"hook"}
    assert hook_errors.count(env.home, now=datetime.now(UTC) + timedelta(days=1, hours=1)) == 0


def _workers(env) -> list[dict]:  # type: ignore[no-untyped-def]
    return json.loads(_run(env, "status", "--json").stdout)["workers"]


def test_the_worker_records_its_configuration_and_a_second_one_is_flagged(env):
    env["REFLECT_WRITER_BACKEND"] = "heuristic"
    with ExitStack() as stack:
        first = stack.enter_context(running_worker(env))
        wait_for(lambda: any(w["pid"] == first.pid for w in _workers(env)), 60, 0.5, "a beat")
        (w,) = _workers(env)
        assert (w["kind"], w["writer_backend"], w["model"], w["home"]) == (
            "worker",
            "heuristic",
            "sonnet",
            str(env.home),
        )
        assert w["version"] and w["host"]
        human = _run(env, "status").stdout
        assert f"running: worker pid {first.pid} on {w['host']} (heuristic / sonnet" in human

        # the shell asks with another backend: doctor describes the worker, not the shell
        shell = dict(env, REFLECT_WRITER_BACKEND="claude")
        doctor = {c["name"]: c for c in json.loads(_run(shell, "doctor", "--json").stdout)}
        assert doctor["writer backend"]["detail"].startswith(
            f"the running worker (pid {first.pid}) uses heuristic / sonnet "
            "(this shell would use claude / sonnet)"
        )

        second = stack.enter_context(running_worker(env))
        wait_for(lambda: len(_workers(env)) == 2, 60, 0.5, "two beats")
        status = json.loads(_run(env, "status", "--json").stdout)
        (warning,) = [x for x in status["warnings"] if "workers on one home" in x]
        assert f"pid {first.pid}" in warning and f"pid {second.pid}" in warning
        errors = wait_for(
            lambda: [
                r
                for r in json.loads(_run(env, "errors", "--json").stdout)
                if r["kind"] == "second_worker"
            ],
            30,
            0.5,
            "the second worker's error",
        )
        assert str(second.pid) in errors[0]["message"] and str(first.pid) in errors[0]["message"]
        doctor = {c["name"]: c for c in json.loads(_run(env, "doctor", "--json").stdout)}
        assert not doctor["worker"]["ok"] and "2 workers on one home" in doctor["worker"]["detail"]
    # stopped: a process of this host that is gone no longer counts, at once
    time.sleep(0.2)
    assert _workers(env) == []
