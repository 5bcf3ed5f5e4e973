"""``install hooks`` registers ``reflect-jobs mcp`` per harness: idempotent and reversible."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from reflect_jobs.install.jsonfile import SettingsFileError
from reflect_jobs.install.mcp import SERVER_NAME, merge_json, merge_toml, server_entry


def _isolated(env, tmp_path: Path):  # type: ignore[no-untyped-def]
    env["HOME"] = str(tmp_path / "user")
    env["CLAUDE_CONFIG_DIR"] = str(tmp_path / "user" / ".claude")
    env["CODEX_HOME"] = str(tmp_path / "user" / ".codex")
    env["COPILOT_HOME"] = str(tmp_path / "user" / ".copilot")
    return tmp_path / "user"


def test_json_merge_keeps_other_servers_and_removal_restores_the_document():
    doc = {"theme": "dark", "mcpServers": {"other": {"command": "o"}}}
    entry = server_entry("claude", {})
    new, action = merge_json(doc, entry)
    assert action == "added" and new["mcpServers"]["other"] == {"command": "o"}
    assert new["mcpServers"][SERVER_NAME]["args"] == ["mcp"]
    assert merge_json(new, entry)[1] == "unchanged"
    back, action = merge_json(new, None)
    assert action == "removed" and back == doc
    assert merge_json({}, None) == ({}, "absent")
    with pytest.raises(SettingsFileError):
        merge_json({"mcpServers": []}, entry)


def test_toml_merge_is_idempotent_reversible_and_keeps_comments():
    original = '# my settings\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n'
    entry = server_entry("codex", {"GLOBAL_LEARNINGS_PATH": "/kb"})
    added, action = merge_toml(original, entry)
    assert action == "added" and added.startswith("# my settings")
    parsed = tomllib.loads(added)
    assert parsed["mcp_servers"][SERVER_NAME]["args"] == ["mcp"]
    assert parsed["mcp_servers"][SERVER_NAME]["env"] == {"GLOBAL_LEARNINGS_PATH": "/kb"}
    assert parsed["mcp_servers"]["other"] == {"command": "x"}
    assert merge_toml(added, entry) == (added, "unchanged")
    moved = {**entry, "command": "/new/venv/bin/reflect-jobs"}
    updated, action = merge_toml(added, moved)
    assert action == "updated" and updated.count(f"[mcp_servers.{SERVER_NAME}]") == 1
    assert tomllib.loads(updated)["mcp_servers"][SERVER_NAME]["command"] == moved["command"]
    assert merge_toml(updated, None) == (original, "removed")
    with pytest.raises(SettingsFileError, match="invalid TOML"):
        merge_toml("[[[", entry)


def test_cli_registers_in_each_harness_file_and_uninstall_removes_only_ours(env, tmp_path):
    user = _isolated(env, tmp_path)
    claude_json = user / ".claude" / ".claude.json"
    claude_json.parent.mkdir(parents=True)
    claude_json.write_text(json.dumps({"numStartups": 3}))
    for harness in ("claude", "codex", "copilot"):
        out = env.invoke("install", "hooks", "--harness", harness).stdout
        assert "MCP server reflect-jobs added" in out
        again = env.invoke("install", "hooks", "--harness", harness).stdout
        assert "MCP server reflect-jobs unchanged" in again
    claude = json.loads(claude_json.read_text())
    assert claude["numStartups"] == 3 and claude["mcpServers"][SERVER_NAME]["type"] == "stdio"
    codex = tomllib.loads((user / ".codex" / "config.toml").read_text())
    assert codex["mcp_servers"][SERVER_NAME]["command"].endswith("reflect-jobs")
    copilot = json.loads((user / ".copilot" / "mcp-config.json").read_text())
    assert copilot["mcpServers"][SERVER_NAME]["type"] == "local"
    assert (
        copilot["mcpServers"][SERVER_NAME]["env"]["GLOBAL_LEARNINGS_PATH"]
        == env["GLOBAL_LEARNINGS_PATH"]
    )
    hooks = json.loads((user / ".claude" / "settings.json").read_text())["hooks"]
    assert "SessionStart" in hooks and "UserPromptSubmit" not in hooks
    for harness in ("claude", "codex", "copilot"):
        env.invoke("install", "hooks", "--harness", harness, "--uninstall")
    assert json.loads(claude_json.read_text()) == {"numStartups": 3}
    assert tomllib.loads((user / ".codex" / "config.toml").read_text()) == {}
    assert json.loads((user / ".copilot" / "mcp-config.json").read_text()) == {}


def test_prompt_recall_hook_is_installed_only_while_opted_in(env, tmp_path):
    user = _isolated(env, tmp_path)
    env["REFLECT_RECALL_ON_PROMPT"] = "1"
    env.invoke("install", "hooks", "--harness", "claude", "--no-mcp")
    settings = user / ".claude" / "settings.json"
    assert "UserPromptSubmit" in json.loads(settings.read_text())["hooks"]
    # install recorded the opt-in in the config file: a re-run without the variable keeps it
    del env["REFLECT_RECALL_ON_PROMPT"]
    out = env.invoke("install", "hooks", "--harness", "claude", "--no-mcp").stdout
    assert "UserPromptSubmit" in json.loads(settings.read_text())["hooks"], out
    # the environment overrides the file: =0 turns it off, and the file now says so
    env["REFLECT_RECALL_ON_PROMPT"] = "0"
    out = env.invoke("install", "hooks", "--harness", "claude", "--no-mcp").stdout
    assert "removed UserPromptSubmit" in out
    assert "UserPromptSubmit" not in json.loads(settings.read_text())["hooks"]
    config = tomllib.loads((tmp_path / "xdg" / "reflect-jobs" / "config.toml").read_text())
    assert config["recall_on_prompt"] is False
    assert not (user / ".claude" / ".claude.json").exists(), "--no-mcp"


def test_a_custom_settings_file_leaves_the_real_mcp_config_alone(env, tmp_path):
    user = _isolated(env, tmp_path)
    custom = tmp_path / "custom.json"
    env.invoke("install", "hooks", "--harness", "codex", "--settings", str(custom))
    assert custom.exists() and not (user / ".codex" / "config.toml").exists()
    mcp_file = tmp_path / "mcp.toml"
    env.invoke(
        "install",
        "hooks",
        "--harness",
        "codex",
        "--settings",
        str(custom),
        "--mcp-config",
        str(mcp_file),
    )
    assert SERVER_NAME in tomllib.loads(mcp_file.read_text())["mcp_servers"]
