"""``doctor`` looks where the other processes look: hooks, service unit, MCP entries, config.

Each case builds the disagreement a user met — a unit written for another home, a shell
variable the hooks never see, an MCP entry left from an old install — and reads the
``configuration`` check ``doctor --json`` prints: the first disagreement and the file to fix.
Then the writer check: a missing key and a model the backend refuses, found without a
network call; and the worker check's fix when the service is installed but not running.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from reflect_jobs.cli import main


@pytest.fixture
def user(env, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A home with Claude Code set up; the shell sets REFLECT_HOME/GLOBAL_LEARNINGS_PATH."""
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"):
        env.pop(var, None)
    return home


def _checks(env) -> dict:  # type: ignore[no-untyped-def]
    out = CliRunner().invoke(main, ["doctor", "--json"], env=dict(env))
    assert out.exit_code in (0, 1), out.output
    return {c["name"]: c for c in json.loads(out.stdout)}


def _cli(env, *args: str):  # type: ignore[no-untyped-def]
    out = CliRunner().invoke(main, list(args), env=dict(env))
    assert out.exit_code == 0, out.output
    return out


def test_everything_agrees_after_install(env, user):
    _cli(env, "install", "hooks", "--harness", "claude")
    _cli(env, "install", "service", "--systemd")
    check = _checks(env)["configuration"]
    assert check["ok"], check
    assert check["detail"] == (
        f"home {env.home}, KB {env.kb} from config file {user}/.config/reflect-jobs/config.toml; "
        "hooks (claude), MCP (claude), service (systemd) agree"
    )


def test_a_shell_variable_the_hooks_do_not_see_is_named(env, user):
    """No config file (an install from before it): the hooks use ~/.reflect, this shell not."""
    check = _checks(env)["configuration"]
    assert not check["ok"]
    assert check["detail"] == (
        f"this shell sets REFLECT_HOME={env.home} (the environment wins here) but the hooks use "
        f"{user}/.reflect from the defaults (no config file)"
        " (and 1 more)"
    )
    assert "unset REFLECT_HOME" in check["fix"] and "reflect-jobs install hooks" in check["fix"]
    _cli(env, "install", "hooks", "--harness", "claude")  # the fix
    assert _checks(env)["configuration"]["ok"]


def test_a_unit_for_another_home_names_the_unit_file(env, user):
    _cli(env, "install", "hooks", "--harness", "claude")
    _cli(env, "install", "service", "--systemd")
    unit = user / ".config" / "systemd" / "user" / "reflect-jobs.service"
    unit.write_text(unit.read_text().replace(f"REFLECT_HOME={env.home}", "REFLECT_HOME=/old/home"))
    check = _checks(env)["configuration"]
    config = user / ".config" / "reflect-jobs" / "config.toml"
    assert check["detail"] == (
        f"service (systemd) in {unit} sets REFLECT_HOME=/old/home, config file {config} says {env.home}"
    )
    assert check["fix"] == (
        f"re-run `reflect-jobs install service` (it rewrites {unit}), or edit {config}"
    )
    _cli(env, "install", "service", "--systemd")
    assert _checks(env)["configuration"]["ok"]


def test_an_mcp_entry_from_an_old_install_is_named(env, user):
    _cli(env, "install", "hooks", "--harness", "claude")
    claude_json = user / ".claude.json"
    doc = json.loads(claude_json.read_text())
    doc["mcpServers"]["reflect-jobs"]["env"]["GLOBAL_LEARNINGS_PATH"] = "/old/kb"
    claude_json.write_text(json.dumps(doc))
    check = _checks(env)["configuration"]
    assert check["detail"].startswith(
        f"MCP (claude) in {claude_json} sets GLOBAL_LEARNINGS_PATH=/old/kb"
    )
    assert check["fix"].startswith("re-run `reflect-jobs install hooks --harness claude`")


def test_the_environment_wins_over_the_file_and_doctor_says_so(env, user):
    _cli(env, "install", "hooks", "--harness", "claude")
    recorded = env["REFLECT_HOME"]
    env["REFLECT_HOME"] = str(user / "elsewhere")
    check = _checks(env)["configuration"]
    assert check["detail"].startswith(
        f"this shell sets REFLECT_HOME={user}/elsewhere (the environment wins here) but the "
        f"hooks use {recorded} from config file"
    )
    status = json.loads(CliRunner().invoke(main, ["status", "--json"], env=dict(env)).stdout)
    assert status["stores"]["db"] == f"sqlite:///{user}/elsewhere/reflect.db", "env wins"


def test_an_unknown_key_fails_the_config_file_check(env, user):
    config = user / ".config" / "reflect-jobs" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('homee = "/typo"\n')
    check = _checks(env)["config file"]
    assert not check["ok"] and "unknown key 'homee'" in check["detail"]
    assert check["fix"] == f"edit {config}"


# --- the writer, without a network call ---------------------------------------------------


def test_openai_without_a_key_names_the_key_not_a_local_server(env):
    from reflect_jobs.doctor import check_backend

    env.update(REFLECT_WRITER_BACKEND="openai", REFLECT_DRAIN_MODEL="gpt-4o-mini")
    env.pop("OPENAI_API_KEY", None)
    check = check_backend(env.settings())
    assert not check["ok"]
    assert "no API key" in check["detail"] and "REFLECT_OPENAI_API_KEY" in check["fix"]
    assert "llama-server" not in check["fix"] + check["detail"]


@pytest.mark.parametrize(
    ("backend", "model", "says"),
    [
        ("openai", "sonnet", "'sonnet' is a Claude alias"),
        ("codex", "haiku", "'haiku' is a Claude alias"),
        ("claude", "gpt-4o", "'gpt-4o' is not a Claude model"),
        ("anthropic", "qwen2.5-coder:7b", "is not a Claude model"),
    ],
)
def test_a_model_the_backend_would_refuse_is_named_with_its_variable(
    env, monkeypatch, backend, model, says
):
    """Where the backend cannot list its models (the Claude and Codex CLIs; an endpoint that
    is down), the names are judged as written, offline."""
    from api_support import STUB_CODEX
    from support import free_port

    from reflect_jobs.doctor import check_backend

    down = f"http://127.0.0.1:{free_port()}"
    env.update(REFLECT_WRITER_BACKEND=backend, REFLECT_DRAIN_MODEL=model)
    env.update(REFLECT_OPENAI_BASE_URL=down + "/v1", REFLECT_CODEX_BIN=str(STUB_CODEX))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", down)
    check = check_backend(env.settings())
    assert not check["ok"] and says in check["detail"], check
    assert "(REFLECT_DRAIN_MODEL)" in check["detail"]


def test_a_served_name_passes_the_static_check(env):
    from reflect_jobs.writer.probe import model_problem

    s = replace(env.settings(), writer_backend="openai", model="qwen2.5-coder:7b")
    assert model_problem("openai", s.model) is None
    assert (
        model_problem("claude", "opus") is None
        and model_problem("anthropic", "claude-sonnet-4-5") is None
    )


def test_an_installed_service_that_never_ran_is_fixed_by_enabling_it(env, user):
    _cli(env, "install", "hooks", "--harness", "claude")
    _cli(env, "install", "service", "--systemd")
    worker = _checks(env)["worker"]
    assert not worker["ok"] and worker["detail"] == "no consumer has ever run"
    assert "systemctl --user enable --now reflect-jobs.service" in worker["fix"]
    assert "reflect-jobs install service --enable" in worker["fix"]
