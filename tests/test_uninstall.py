"""``reflect-jobs uninstall`` and ``install service --enable|--uninstall`` on real files.

Other tools' settings must come back byte for byte, files that held only our entries must go
(never a ``{}`` left behind), backups shrink to the newest, and ``--purge`` deletes the data
only after a yes, and only directories that are ours. The service manager is a recording
``systemctl`` stub on PATH (no real unit is ever started). CLI-only: run in-process.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from reflect_jobs.cli import main

CLAUDE_SETTINGS = (
    json.dumps(
        {
            "model": "opus",
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "other-tool stop"}]}]},
        },
        indent=2,
    )
    + "\n"
)
CODEX_CONFIG = '# my codex config\nmodel = "o4"\n\n[mcp_servers.other]\ncommand = "other"\n'
CLAUDE_JSON = '{"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}'


@pytest.fixture
def machine(tmp_path: Path) -> dict:
    """A user home with the three harnesses set up, and a stub systemctl."""
    home = tmp_path / "home"
    for d in (".claude", ".codex", ".copilot/hooks", ".config"):
        (home / d).mkdir(parents=True)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "systemctl.log"
    stub = stubs / "systemctl"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit 0\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PATH": f"{stubs}:/usr/bin:/bin",
        "REFLECT_HOME": str(tmp_path / "state"),
        "GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb"),
        "CLAUDE_CONFIG_DIR": None,
        "CODEX_HOME": None,
        "COPILOT_HOME": None,
    }
    return {"home": home, "env": env, "log": log, "tmp": tmp_path}


def _cli(machine: dict, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), env=machine["env"], input=input)


def _others(home: Path) -> dict[Path, bytes]:
    files = {
        home / ".claude" / "settings.json": CLAUDE_SETTINGS,
        home / ".codex" / "config.toml": CODEX_CONFIG,
        home / ".claude.json": CLAUDE_JSON,
        home / ".copilot" / "hooks" / "other.json": '{"version": 1, "hooks": {}}\n',
    }
    for path, text in files.items():
        path.write_text(text)
    return {p: p.read_bytes() for p in files}


def _install_everything(machine: dict) -> None:
    for harness in ("claude", "codex", "copilot"):
        out = _cli(machine, "install", "hooks", "--harness", harness)
        assert out.exit_code == 0, out.output
    machine["env"]["REFLECT_RECALL_ON_PROMPT"] = "1"  # a second install: more backups
    for harness in ("claude", "codex"):
        assert _cli(machine, "install", "hooks", "--harness", harness).exit_code == 0
    del machine["env"]["REFLECT_RECALL_ON_PROMPT"]
    out = _cli(machine, "install", "service", "--systemd")
    assert out.exit_code == 0, out.output


def test_nothing_installed_exits_0_and_says_so(machine):
    out = _cli(machine, "uninstall")
    assert out.exit_code == 0 and out.output == (
        "nothing of reflect-jobs is installed here: nothing to remove\n"
    )


def test_uninstall_restores_other_tools_bytes_and_prunes_backups(machine):
    home = machine["home"]
    originals = _others(home)
    _install_everything(machine)
    assert len(list((home / ".claude").glob("settings.json.bak-*"))) >= 2
    unit = home / ".config" / "systemd" / "user" / "reflect-jobs.service"
    assert unit.exists()
    out = _cli(machine, "uninstall")
    assert out.exit_code == 0, out.output
    for path, data in originals.items():
        assert path.read_bytes() == data, f"{path} changed"
    for created in (home / ".codex" / "hooks.json", home / ".copilot" / "mcp-config.json"):
        assert not created.exists(), f"{created}: a file that held only ours is deleted"
    assert not (home / ".copilot" / "hooks" / "reflect-jobs.json").exists()
    for path in originals:
        assert len(list(path.parent.glob(path.name + ".bak-*"))) <= 1, path
    assert not unit.exists()
    assert "disable --now reflect-jobs.service" in machine["log"].read_text()
    assert "your data stays in" in out.output
    assert (home / ".config" / "reflect-jobs" / "config.toml").exists(), "kept without --purge"
    assert _cli(machine, "uninstall").output.startswith("nothing of reflect-jobs")


def test_purge_asks_and_deletes_only_what_is_ours(machine):
    tmp = machine["tmp"]
    _install_everything(machine)
    (tmp / "kb" / "documents").mkdir(parents=True)
    (tmp / "kb" / "documents" / "lrn-x.md").write_text("note")
    out = _cli(machine, "uninstall", "--purge", input="n\n")
    assert out.exit_code == 1 and "Aborted" in out.output
    assert (tmp / "kb" / "documents" / "lrn-x.md").exists() and (tmp / "state").exists()
    assert "--purge deletes" in out.output and str(tmp / "kb") in out.output

    elsewhere = tmp / "precious"
    elsewhere.mkdir()
    (elsewhere / "thesis.tex").write_text("mine")
    machine["env"]["GLOBAL_LEARNINGS_PATH"] = str(elsewhere)
    out = _cli(machine, "uninstall", "--purge", "--yes")
    assert out.exit_code == 1
    assert out.output.strip().endswith(
        "does not look like reflect-jobs data (none of documents, index, repos): not deleting it"
    )
    assert (elsewhere / "thesis.tex").read_text() == "mine"
    assert (machine["home"] / ".claude" / "settings.json").exists(), "refused before removing"

    machine["env"]["GLOBAL_LEARNINGS_PATH"] = str(tmp / "kb")
    out = _cli(machine, "uninstall", "--purge", "--yes")
    assert out.exit_code == 0, out.output
    assert not (tmp / "kb").exists() and not (tmp / "state").exists()
    assert not (machine["home"] / ".config" / "reflect-jobs").exists()
    leftovers = [p for p in machine["home"].rglob("*") if p.is_file()]
    assert leftovers == [], leftovers


def test_purge_with_a_harness_is_a_usage_error(machine):
    out = _cli(machine, "uninstall", "--harness", "codex", "--purge")
    assert out.exit_code == 2 and "Usage:" not in out.output
    assert "use it without --harness" in out.output


def test_one_harness_leaves_the_others_and_the_service(machine):
    _install_everything(machine)
    out = _cli(machine, "uninstall", "--harness", "codex")
    assert out.exit_code == 0, out.output
    home = machine["home"]
    for f in (home / ".codex" / "config.toml", home / ".codex" / "hooks.json"):
        assert not f.exists(), f"{f} held only ours"
    assert "reflect-jobs-hook" in (home / ".claude" / "settings.json").read_text()
    assert (home / ".config" / "systemd" / "user" / "reflect-jobs.service").exists()


def test_install_service_enable_then_uninstall(machine):
    out = _cli(machine, "install", "service", "--systemd", "--enable")
    assert out.exit_code == 0, out.output
    calls = machine["log"].read_text().splitlines()
    assert calls == ["--user daemon-reload", "--user enable --now reflect-jobs.service"]
    assert "enabled and running" in out.output
    config = json.loads(_cli(machine, "config", "--json").stdout)
    assert {r["name"]: r["source"] for r in config["settings"]}["home"] == "environment"
    unit = machine["home"] / ".config" / "systemd" / "user" / "reflect-jobs.service"
    out = _cli(machine, "install", "service", "--systemd", "--uninstall")
    assert out.exit_code == 0 and f"removed {unit}" in out.output
    assert "--user disable --now reflect-jobs.service" in machine["log"].read_text()
    assert not unit.exists()
    again = _cli(machine, "install", "service", "--systemd", "--uninstall")
    assert again.exit_code == 0 and "nothing to remove" in again.output


def test_enable_that_the_manager_refuses_is_one_line_with_the_commands(machine):
    stub = Path(machine["env"]["PATH"].split(":")[0]) / "systemctl"
    stub.write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    out = _cli(machine, "install", "service", "--systemd", "--enable")
    assert out.exit_code == 1
    assert "failed: systemctl --user daemon-reload — Failed to connect to bus" in out.output
    assert (
        "run by hand: systemctl --user daemon-reload && systemctl --user enable --now" in out.output
    )


def test_a_broken_setting_does_not_keep_anyone_from_removing_the_hooks(machine):
    _install_everything(machine)
    machine["env"]["REFLECT_DRAIN_DAILY_MAX"] = "banana"
    assert _cli(machine, "status").exit_code == 2
    out = _cli(machine, "uninstall")
    assert out.exit_code == 0, out.output
    assert not (machine["home"] / ".claude" / "settings.json").exists(), "held only ours"
    purge = _cli(machine, "uninstall", "--purge", "--yes")
    assert purge.exit_code == 2 and "REFLECT_DRAIN_DAILY_MAX must be an integer" in purge.output
