"""The /reflect and /handoff skills (issue 26 item 2): installed beside the hooks where Claude
Code and Codex read personal skills, never losing a person's file, removed by --uninstall;
and the commands they tell the agent to run work as written."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from click.testing import CliRunner
from recall_support import make_repo

from reflect_jobs.cli import main
from reflect_jobs.install.skills import MARKER, skill_text


def _frontmatter(text: str) -> dict[str, str]:
    head = text.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.strip().splitlines())


def _install(*extra: str, harness: str = "claude"):  # type: ignore[no-untyped-def]
    out = CliRunner().invoke(main, ["install", "hooks", "--harness", harness, "--no-mcp", *extra])
    assert out.exit_code == 0, out.output
    return out.output


def test_claude_skills_install_keep_edits_and_uninstall(tmp_path, monkeypatch):
    claude = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("REFLECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GLOBAL_LEARNINGS_PATH", str(tmp_path / "kb"))
    # A handoff skill the person wrote themselves, under the same name.
    own = claude / "skills" / "handoff" / "SKILL.md"
    own.parent.mkdir(parents=True)
    own.write_text("---\nname: handoff\ndescription: my own\n---\nMine.\n")
    out = _install()
    reflect = claude / "skills" / "reflect" / "SKILL.md"
    text = reflect.read_text()
    meta = _frontmatter(text)
    assert meta["name"] == "reflect" and "retrospective" in meta["description"]
    assert MARKER in text and "list --json" in text and " done ID --note" in text
    assert reflect.stat().st_mode & 0o777 == 0o600
    assert own.read_text().endswith("Mine.\n"), "a person's skill is never replaced"
    assert "skill /handoff kept" in out and "skill /reflect installed" in out
    assert "skill /reflect unchanged" in _install()

    # An edited copy of ours is backed up before it is replaced.
    reflect.write_text(text + "\nAlso run the linters.\n")
    out = _install()
    backups = list(reflect.parent.glob("SKILL.md.bak-*"))
    assert len(backups) == 1 and "Also run the linters." in backups[0].read_text()
    assert reflect.read_text() == text and "skill /reflect replaced" in out

    # --uninstall removes ours (edited: after a backup) and leaves the person's alone.
    reflect.write_text(text + "\nmine now\n")
    out = _install("--uninstall")
    assert not reflect.exists() and own.exists() and "skill /reflect removed" in out
    assert any("mine now" in b.read_text() for b in reflect.parent.glob("SKILL.md.bak-*"))


def test_codex_skills_go_where_codex_reads_personal_skills(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / ".codex"))
    monkeypatch.setenv("REFLECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GLOBAL_LEARNINGS_PATH", str(tmp_path / "kb"))
    _install(harness="codex")
    for name in ("reflect", "handoff"):
        path = tmp_path / ".agents" / "skills" / name / "SKILL.md"
        assert _frontmatter(path.read_text())["name"] == name
    _install("--uninstall", harness="codex")
    assert not (tmp_path / ".agents").exists()  # the directories we made, gone too


def test_a_custom_settings_file_leaves_the_real_skills_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("REFLECT_HOME", str(tmp_path / "home"))
    _install("--settings", str(tmp_path / "s.json"))
    assert not (tmp_path / "claude-config" / "skills").exists()
    _install("--settings", str(tmp_path / "s.json"), "--skills-dir", str(tmp_path / "sk"))
    assert (tmp_path / "sk" / "reflect" / "SKILL.md").exists()


def test_the_handoff_skills_command_records_an_item_shown_first(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    env.run(
        "reflections", "add", "--kind", "action", "--title", "Something else", "--repo", str(repo)
    )
    line = next(x for x in skill_text("handoff").splitlines() if "add --kind handoff" in x)
    argv = shlex.split(re.sub(r"^\s*`|`\s*$", "", line.strip()))
    argv = [
        a.replace("<topic in a few words>", "pnpm").replace("<the prompt>", "Finish it.")
        for a in argv
    ]
    assert Path(argv[0]).name == "reflections" and "--by" in argv
    added = env.run(*["reflections", *argv[1:], "--repo", str(repo)])
    ident = added.stdout.strip()
    ctx = json.loads(env.run("reflections", "context", "--json", "--repo", str(repo)).stdout)
    assert ctx["items"][0]["id"] == ident and ctx["items"][0]["by"] == "skill"


def test_uninstall_takes_the_skills_and_the_statusline_back(tmp_path, monkeypatch):
    claude = tmp_path / "claude-config"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / ".codex"))
    monkeypatch.setenv("REFLECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GLOBAL_LEARNINGS_PATH", str(tmp_path / "kb"))
    _install("--statusline")
    assert (claude / "skills" / "reflect" / "SKILL.md").exists()
    assert "statusLine" in json.loads((claude / "settings.json").read_text())
    out = CliRunner().invoke(main, ["uninstall", "--harness", "claude", "--yes"])
    assert out.exit_code == 0, out.output
    assert "skill /reflect removed" in out.output and "statusLine removed" in out.output
    assert not (claude / "skills").exists()
    settings = claude / "settings.json"
    assert not settings.exists() or "statusLine" not in json.loads(settings.read_text())
