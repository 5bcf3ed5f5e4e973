"""``reflect-jobs install hooks|service``: idempotent merges into real files, rendered units.

The merge edits files that belong to the user and to other tools, so every test checks the
bytes on disk: what we did not own must come back exactly, a re-run must not touch the file,
and a file we cannot parse must be left alone.
"""

from __future__ import annotations

import json
import os
import plistlib
import subprocess
from pathlib import Path

import pytest
from support import BIN, ROOT

from reflect_jobs import harnesses
from reflect_jobs import install as inst

HOOK = str(BIN / "reflect-jobs-hook")
OTHER_STOP = {"hooks": [{"type": "command", "command": "other-tool stop", "timeout": 30}]}


def user_settings() -> dict:
    """A Claude Code settings file with unrelated keys and another tool's hooks."""
    return {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}
            ],
            "Stop": [OTHER_STOP],
            "Notification": [],
        },
        "env": {"GREETING": "grüß dich"},
    }


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def hook_isolated(env, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Point every harness's config dir into tmp_path (never the real ~/.claude)."""
    env["HOME"] = str(tmp_path / "user")
    env["CLAUDE_CONFIG_DIR"] = str(tmp_path / "user" / ".claude")
    env["CODEX_HOME"] = str(tmp_path / "user" / ".codex")
    env["COPILOT_HOME"] = str(tmp_path / "user" / ".copilot")
    return env


# --- the pure merge -------------------------------------------------------------------------


def test_merge_appends_one_entry_per_event_and_keeps_everything_else():
    doc = user_settings()
    plan = inst.merge_hooks(doc, "claude", f"{HOOK} claude")
    assert doc == user_settings(), "the input document is not modified"
    new = plan.doc
    assert list(new) == ["model", "permissions", "hooks", "env"]
    assert plan.added == ["PreCompact", "Stop", "SessionEnd", "SessionStart"]
    assert new["hooks"]["Stop"][0] == OTHER_STOP, "other tools' entries come first, untouched"
    for event, timeout in (("PreCompact", 5), ("Stop", 5), ("SessionEnd", 3)):
        ours = {"type": "command", "command": f"{HOOK} claude --event {event}", "timeout": timeout}
        assert new["hooks"][event][-1] == {"hooks": [ours]}
    assert list(new["hooks"])[:3] == ["PreToolUse", "Stop", "Notification"]
    unrelated = {k: v for k, v in new.items() if k != "hooks"}
    assert unrelated == {k: v for k, v in user_settings().items() if k != "hooks"}
    again = inst.merge_hooks(new, "claude", f"{HOOK} claude")
    assert not again.changed and again.doc == new


def test_merge_updates_a_moved_venv_in_place_and_drops_duplicates():
    old = {"type": "command", "command": "/old/venv/bin/reflect-jobs-hook claude", "timeout": 9}
    doc = {
        "hooks": {
            "Stop": [
                {"hooks": [old, {"type": "command", "command": "other-tool stop"}]},
                {"hooks": [dict(old)]},
                OTHER_STOP,
            ]
        }
    }
    plan = inst.merge_hooks(doc, "claude", f"{HOOK} claude")
    stop = plan.doc["hooks"]["Stop"]
    assert "Stop" in plan.updated
    # the first copy keeps its place and the user's timeout; the second copy's group is gone
    assert stop == [
        {
            "hooks": [
                {"type": "command", "command": f"{HOOK} claude --event Stop", "timeout": 9},
                {"type": "command", "command": "other-tool stop"},
            ]
        },
        OTHER_STOP,
    ]
    assert inst.installed_events(plan.doc)["Stop"] == [f"{HOOK} claude --event Stop"]


def test_remove_takes_exactly_ours_and_the_containers_only_we_emptied():
    installed = inst.merge_hooks(user_settings(), "claude", f"{HOOK} claude").doc
    # a group shared with another tool's command keeps that command
    installed["hooks"]["PreToolUse"][0]["hooks"].append(
        {"type": "command", "command": f"{HOOK} claude"}
    )
    plan = inst.remove_hooks(installed)
    assert plan.doc == user_settings()  # "Notification": [] was not ours to drop
    assert set(plan.removed) == {"PreCompact", "Stop", "SessionEnd", "SessionStart", "PreToolUse"}
    only_ours = inst.merge_hooks({"model": "x"}, "codex", f"{HOOK} codex").doc
    assert inst.remove_hooks(only_ours).doc == {"model": "x"}
    assert not inst.remove_hooks({"model": "x"}).changed


def test_an_older_install_is_brought_to_the_contract_and_back():
    """An install from before ``--event``: our SubagentStop entry (which let a subagent's
    transcript replace the parent's) goes, every command names its event, a timeout the
    harness would clamp (Codex: SessionEnd at most 3 s) is replaced and an accepted one kept;
    the result is stable, and uninstall leaves exactly the other tools' entries."""
    old = "/old/venv/bin/reflect-jobs-hook codex"

    def group(command: str, timeout: int) -> dict:
        return {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}

    doc = {
        "hooks": {
            "PreCompact": [group(old, 7)],
            "Stop": [OTHER_STOP, group(old, 5)],
            "SubagentStop": [group(old, 5), group("other-tool sub", 30)],
            "SessionEnd": [group(old, 10)],
        }
    }
    plan = inst.merge_hooks(doc, "codex", f"{HOOK} codex")
    assert plan.removed == ["SubagentStop"] and plan.added == ["SessionStart"]  # recall
    assert plan.updated == ["PreCompact", "Stop", "SessionEnd"]
    hooks = plan.doc["hooks"]
    assert hooks["SubagentStop"] == [group("other-tool sub", 30)], "not ours: kept"
    assert hooks["PreCompact"] == [group(f"{HOOK} codex --event PreCompact", 7)]
    assert hooks["Stop"] == [OTHER_STOP, group(f"{HOOK} codex --event Stop", 5)]
    assert hooks["SessionEnd"] == [group(f"{HOOK} codex --event SessionEnd", 3)]
    again = inst.merge_hooks(plan.doc, "codex", f"{HOOK} codex")
    assert not again.changed and again.doc == plan.doc
    assert inst.remove_hooks(plan.doc).doc == {
        "hooks": {"Stop": [OTHER_STOP], "SubagentStop": [group("other-tool sub", 30)]}
    }


@pytest.mark.parametrize(
    "doc, message",
    [
        ([1, 2], "top level is a JSON list"),
        ({"hooks": []}, '"hooks" is a JSON list'),
        ({"hooks": {"Stop": {"hooks": []}}}, '"hooks.Stop" is a JSON dict'),
    ],
)
def test_unexpected_shapes_are_refused(doc, message):
    with pytest.raises(inst.SettingsFileError, match=message.replace(".", r"\.")):
        inst.merge_hooks(doc, "claude", "x reflect-jobs-hook claude")


def test_snippets_in_hooks_dir_match_what_install_writes():
    """hooks/*.json are the documentation of the wiring; install is its implementation."""
    files = {"claude": "claude-settings.json", "codex": "codex-hooks.json"}
    files["copilot"] = "copilot-hooks.json"
    for harness, name in files.items():
        snippet = json.loads((ROOT / "hooks" / name).read_text())
        spec = harnesses.get(harness)
        assert tuple(snippet["hooks"]) == spec.event_names, name
        expected = inst.merge_hooks(spec.new_document(), harness, f"REFLECT_JOBS_HOOK {harness}")
        expected = expected.doc
        assert snippet == expected, name


def test_indentation_and_final_newline_are_the_files_own():
    assert inst.guess_indent('{\n    "a": 1\n}\n') == 4
    assert inst.guess_indent('{\n\t"a": 1\n}') == "\t"
    assert inst.guess_indent('{"a": 1}') is None
    assert inst.guess_indent("") == 2
    assert inst.dump_like({"a": [1]}, '{\n\t"b": 2\n}') == '{\n\t"a": [\n\t\t1\n\t]\n}'
    assert inst.dump_like({"a": 1, "b": "é"}, '{"x":1}\n') == '{"a":1,"b":"é"}\n'
    assert inst.dump_like({"a": 1}, '{"x": 1}') == '{"a": 1}'


# --- files --------------------------------------------------------------------------------


def test_apply_is_idempotent_with_one_backup_and_byte_identical_rerun(tmp_path):
    f = tmp_path / "settings.json"
    original = json.dumps(user_settings(), indent=4, ensure_ascii=False) + "\n"
    f.write_text(original, encoding="utf-8")
    os.chmod(f, 0o600)
    change = inst.apply_hooks(f, "claude", command=f"{HOOK} claude")
    assert change.changed and change.backup is not None
    assert change.backup.read_text(encoding="utf-8") == original
    after = f.read_bytes()
    assert b'\n    "model": "opus"' in after, "the file's 4-space indent is kept"
    assert "grüß dich" in after.decode("utf-8"), "non-ASCII text stays readable"
    assert oct(f.stat().st_mode & 0o777) == oct(0o600), "the file's mode is kept"
    again = inst.apply_hooks(f, "claude", command=f"{HOOK} claude")
    assert not again.changed and again.backup is None
    assert f.read_bytes() == after and len(backups(f)) == 1
    removed = inst.apply_hooks(f, "claude", uninstall=True)
    assert removed.changed and len(backups(f)) == 2
    assert json.loads(f.read_text(encoding="utf-8")) == user_settings()
    assert list(tmp_path.glob(".settings.json.*")) == [], "no temp file left behind"


def test_a_symlinked_settings_file_stays_a_symlink(tmp_path):
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n')
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    inst.apply_hooks(link, "claude", command=f"{HOOK} claude")
    assert link.is_symlink() and "reflect-jobs-hook" in real.read_text()


def test_copilot_gets_a_file_of_its_own_removed_on_uninstall(tmp_path):
    f = inst.default_settings_path("copilot", {"COPILOT_HOME": str(tmp_path / "cp")})
    assert f == tmp_path / "cp" / "hooks" / "reflect-jobs.json"
    change = inst.apply_hooks(f, "copilot", command=f"{HOOK} copilot")
    assert change.created and change.backup is None
    doc = json.loads(f.read_text())
    assert doc["version"] == 1 and list(doc["hooks"]) == list(harnesses.COPILOT.event_names)
    assert doc["hooks"]["agentStop"] == [
        {"type": "command", "bash": f"{HOOK} copilot --event agentStop", "timeoutSec": 5}
    ]
    gone = inst.apply_hooks(f, "copilot", uninstall=True)
    assert gone.deleted and not f.exists() and gone.backup and gone.backup.exists()


def test_a_settings_file_we_create_is_private_and_its_directory_made(tmp_path):
    f = tmp_path / "new" / "dir" / "settings.json"
    change = inst.apply_hooks(f, "claude", command=f"{HOOK} claude")
    assert change.created and f.exists()
    assert oct(f.stat().st_mode & 0o777) == oct(0o600)


def test_a_unit_is_written_0644_with_a_backup_of_what_it_replaces(tmp_path):
    home, unit = tmp_path / "home", tmp_path / "units" / "reflect-jobs.service"
    first = inst.write_unit(unit, "[Unit]\n", home=home)
    assert first.changed and first.backup is None and home.is_dir()
    assert oct(unit.stat().st_mode & 0o777) == oct(0o644)
    assert not inst.write_unit(unit, "[Unit]\n", home=home).changed
    unit.chmod(0o600)
    second = inst.write_unit(unit, "[Unit]\nDescription=x\n", home=home)
    assert second.changed and second.backup and second.backup.read_text() == "[Unit]\n"
    assert oct(unit.stat().st_mode & 0o777) == oct(0o644), "a unit is 0644 whatever it was"


def test_every_harness_the_hook_accepts_has_a_spec():
    assert harnesses.NAMES == ("claude", "codex", "copilot")
    assert all(spec.name == name for name, spec in harnesses.REGISTRY.items())
    assert harnesses.COMMAND_KEYS == ("command", "bash", "powershell")


# --- the CLI ------------------------------------------------------------------------------


def test_cli_install_hooks_twice_then_uninstall(env, tmp_path):
    hook_isolated(env, tmp_path)
    settings = tmp_path / "user" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = json.dumps(user_settings(), indent=2, ensure_ascii=False) + "\n"
    settings.write_text(original, encoding="utf-8")

    out = env.invoke("install", "hooks", "--harness", "claude").stdout
    assert "added PreCompact, Stop, SessionEnd" in out and "backup" in out
    installed = settings.read_bytes()
    doc = json.loads(installed)
    end = doc["hooks"]["SessionEnd"][0]["hooks"][0]
    assert end == {"type": "command", "command": f"{HOOK} claude --event SessionEnd", "timeout": 3}
    assert Path(HOOK).is_absolute() and os.access(HOOK, os.X_OK)

    again = env.invoke("install", "hooks", "--harness", "claude").stdout
    assert "already installed" in again
    assert settings.read_bytes() == installed and len(backups(settings)) == 1

    # the installed command is runnable as the harness runs it: exit 0, nothing printed
    payload = json.dumps({"session_id": "s1", "transcript_path": str(settings)})
    cmd = doc["hooks"]["Stop"][-1]["hooks"][0]["command"]
    proc = subprocess.run(
        cmd, shell=True, input=payload, capture_output=True, text=True, env=dict(env), timeout=30
    )
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    assert not (env.home / "hook-errors.log").exists()

    out = env.invoke("install", "hooks", "--harness", "claude", "--uninstall").stdout
    assert "removed" in out
    assert json.loads(settings.read_text(encoding="utf-8")) == user_settings()
    out = env.invoke("install", "hooks", "--harness", "claude", "--uninstall").stdout
    assert "not installed" in out and len(backups(settings)) == 2


def test_cli_dry_run_shows_a_diff_and_writes_nothing(env, tmp_path):
    hook_isolated(env, tmp_path)
    f = tmp_path / "hooks.json"
    f.write_text('{\n  "hooks": {}\n}\n')
    out = env.invoke("install", "hooks", "--harness", "codex", "--settings", str(f), "--dry-run")
    assert out.stdout.startswith(f"--- {f}\n+++ {f}\n")
    assert f'+            "command": "{HOOK} codex --event PreCompact",' in out.stdout
    assert "not written" in out.stdout
    assert f.read_text() == '{\n  "hooks": {}\n}\n' and backups(f) == []


def test_cli_malformed_settings_exit_1_with_one_line_and_untouched(env, tmp_path):
    hook_isolated(env, tmp_path)
    f = tmp_path / "settings.json"
    broken = '{"model": "opus",\n  "hooks": {\n}\n'
    f.write_text(broken)
    proc = env.invoke("install", "hooks", "--harness", "claude", "--settings", str(f), check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert "not valid JSON (line 4" in proc.stderr and "left untouched" in proc.stderr
    assert f.read_text() == broken and backups(f) == []
    f.write_text('{"hooks": []}')
    proc = env.invoke("install", "hooks", "--harness", "claude", "--settings", str(f), check=False)
    assert proc.returncode == 1 and '"hooks" is a JSON list' in proc.stderr


def test_cli_codex_and_copilot_default_paths(env, tmp_path):
    hook_isolated(env, tmp_path)
    env.invoke("install", "hooks", "--harness", "codex")
    codex = json.loads((tmp_path / "user" / ".codex" / "hooks.json").read_text())
    assert list(codex["hooks"]) == ["PreCompact", "Stop", "SessionEnd", "SessionStart"]
    assert codex["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] <= 3, "Codex's cap"
    env.invoke("install", "hooks", "--harness", "copilot")
    assert (tmp_path / "user" / ".copilot" / "hooks" / "reflect-jobs.json").exists()


# --- service units -----------------------------------------------------------------------


def test_systemd_unit_renders_validates_and_is_idempotent(env, tmp_path):
    out_path = tmp_path / "units" / "reflect-jobs.service"
    proc = env.invoke("install", "service", "--systemd", "--output", str(out_path))
    text = out_path.read_text()
    sections = inst.parse_unit(text)
    assert set(sections) == {"Unit", "Service", "Install"}
    service = sections["Service"]
    assert dict(service)["ExecStart"] == f"{BIN}/reflect-jobs worker"
    envs = [v for k, v in service if k == "Environment"]
    assert f'"REFLECT_HOME={env.home}"' in envs and f'"GLOBAL_LEARNINGS_PATH={env.kb}"' in envs
    path_env = next(v for v in envs if v.startswith('"PATH='))
    assert path_env.startswith(f'"PATH={BIN}:')
    assert dict(service)["TimeoutStopSec"] == "330" and dict(service)["KillSignal"] == "SIGTERM"
    assert inst.PLACEHOLDER.search(text) is None
    assert inst.validate_unit(text) == []
    assert "systemctl --user enable --now reflect-jobs.service" in proc.stdout
    assert f"systemctl --user link {out_path}" in proc.stdout
    if Path("/usr/bin/systemd-analyze").exists() or "systemd-analyze" in proc.stdout:
        assert "systemd-analyze verify: ok" in proc.stdout
    again = env.invoke("install", "service", "--systemd", "--output", str(out_path))
    assert "unchanged" in again.stdout and list(out_path.parent.iterdir()) == [out_path]


def test_launchd_plist_prints_and_parses(env):
    env["REFLECT_DRAIN_TIMEOUT"] = "600"
    proc = env.invoke("install", "service", "--launchd", "--print")
    data = plistlib.loads(proc.stdout.encode())
    assert data["Label"] == "com.reflect-jobs.worker"
    assert data["ProgramArguments"] == [f"{BIN}/reflect-jobs", "worker"]
    assert data["EnvironmentVariables"]["REFLECT_HOME"] == str(env.home)
    assert data["EnvironmentVariables"]["HF_HUB_OFFLINE"] == "1"
    assert data["ExitTimeOut"] == 630 and data["StandardErrorPath"].startswith(str(env.home))
    assert inst.validate_plist(proc.stdout) == [] and "@" not in proc.stdout.split("-->")[-1]


def test_render_escapes_what_each_format_treats_specially(tmp_path):
    values = inst.service_values(
        home=Path("/srv/50% & <more>"), kb_path=Path('/kb/"q"'), timeout_sec=300, path_env="/bin"
    )
    unit = inst.render_service("systemd", inst.template_text("systemd"), values)

    def unquote(v: str) -> str:  # what systemd does with a quoted Environment= assignment
        v = v[1:-1] if v.startswith('"') else v
        return v.replace('\\"', '"').replace("\\\\", "\\").replace("%%", "%")

    pairs = [unquote(v) for k, v in inst.parse_unit(unit)["Service"] if k == "Environment"]
    envs = dict(p.split("=", 1) for p in pairs)
    assert envs["REFLECT_HOME"] == "/srv/50% & <more>"
    assert envs["GLOBAL_LEARNINGS_PATH"] == '/kb/"q"'
    assert "50%% & <more>" in unit
    plist = inst.render_service("launchd", inst.template_text("launchd"), values)
    data = plistlib.loads(plist.encode())
    assert data["EnvironmentVariables"]["REFLECT_HOME"] == "/srv/50% & <more>"
    assert data["EnvironmentVariables"]["GLOBAL_LEARNINGS_PATH"] == '/kb/"q"'


def test_validators_catch_broken_units():
    assert "missing [Install]" in inst.validate_unit("[Unit]\n[Service]\nExecStart=/x\n")
    assert any(
        "absolute" in p for p in inst.validate_unit("[Unit]\n[Service]\nExecStart=x\n[Install]\n")
    )
    assert any(
        "PLACEHOLDER" in p
        for p in inst.validate_unit("[Unit]\n[Service]\nExecStart=@VENV@/x\n[Install]\n")
    )
    assert any("key=value" in p for p in inst.validate_unit("[Unit]\nnonsense\n"))
    assert inst.validate_plist("<plist><dict>")[0].startswith("not a valid plist")
    template = inst.template_text("launchd")
    assert inst.validate_plist(template) != [], "an unrendered template is not a valid plist"
