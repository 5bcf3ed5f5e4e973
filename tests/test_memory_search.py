"""One search over everything the agents remember (issue 26 item 4): ``reflections search``
and MCP ``search`` span the items, the KB and the harnesses' memory files — Claude Code's
project memory and Codex's memories — indexed read-only, refreshed by stat, bounded, and
never following a link out of the harness's directory."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from click.testing import CliRunner
from recall_support import make_repo

from reflect_jobs.recall import tools
from reflect_jobs.recall.mcp_scope import ServerScope
from reflect_jobs.reflections import memories
from reflect_jobs.reflections.cli import main as reflections
from reflect_jobs.reflections.index import ReflectionIndex


def _setup(env, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    for name in ("REFLECT_HOME", "GLOBAL_LEARNINGS_PATH", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    project = memories.claude_project_name(str(repo))
    claude = tmp_path / "claude-config" / "projects" / project / "memory"
    claude.mkdir(parents=True)
    codex = tmp_path / "codex-home" / "memories"
    (codex / "rollout_summaries").mkdir(parents=True)
    return repo, claude, codex


def _search(repo: Path, query: str) -> dict:  # type: ignore[type-arg]
    out = CliRunner().invoke(reflections, ["search", query, "--json", "--repo", str(repo)])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_search_spans_items_and_both_harnesses_memories(env, tmp_path, monkeypatch):
    repo, claude, codex = _setup(env, tmp_path, monkeypatch)
    mem = claude / "MEMORY.md"
    mem.write_text("# Shop memory\n\nThe sqlite WAL checkpoint runs after every vacuum.\n")
    (codex / "rollout_summaries" / "r1.md").write_text("# Rollout\nTuned the sqlite wal size.\n")
    (codex / "memory_summary.md").write_text("Nothing about databases here.\n")
    CliRunner().invoke(
        reflections, ["add", "--kind", "action", "--title", "Tune sqlite wal", "--repo", str(repo)]
    )
    before = mem.stat()
    found = _search(repo, "sqlite wal")
    assert [i["title"] for i in found["items"]] == ["Tune sqlite wal"]
    files = {m["file"]: m for m in found["memories"]}
    assert set(files) == {str(mem), str(codex / "rollout_summaries" / "r1.md")}
    assert files[str(mem)]["harness"] == "claude" and files[str(mem)]["title"] == "Shop memory"
    assert "checkpoint" in files[str(mem)]["snippet"]
    after = mem.stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    text = CliRunner().invoke(reflections, ["search", "sqlite wal", "--repo", str(repo)])
    assert "memories:" in text.output and str(mem) in text.output

    # Refreshed by stat: an edit is searchable at once, a removed file is forgotten.
    mem.write_text("# Shop memory\n\nThe deploy needs the blue-green flag.\n")
    assert [m["file"] for m in _search(repo, "blue green")["memories"]] == [str(mem)]
    assert str(mem) not in [m["file"] for m in _search(repo, "checkpoint vacuum")["memories"]]
    (codex / "rollout_summaries" / "r1.md").unlink()
    assert _search(repo, "sqlite wal")["memories"] == []


def test_links_out_of_the_harness_dirs_are_never_followed(env, tmp_path, monkeypatch):
    repo, claude, _codex = _setup(env, tmp_path, monkeypatch)
    secret = tmp_path / "shadow"
    secret.write_text("root:zebracorn-hash:19000:0:99999:7:::\n")
    (claude / "evil.md").symlink_to(secret)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "also.md").write_text("zebracorn in a linked directory\n")
    (claude / "linked").symlink_to(outside, target_is_directory=True)
    (claude / "ok.md").write_text("A zebracorn of our own.\n")
    hits = _search(repo, "zebracorn")["memories"]
    assert [h["file"] for h in hits] == [str(claude / "ok.md")]


def test_huge_directories_and_files_are_bounded_and_logged(tmp_path, caplog):
    base = tmp_path / "memory"
    base.mkdir()
    for n in range(memories.MAX_FILES + 50):
        (base / f"m{n:05d}.md").write_text(f"note {n} quokka\n")
    with open(base / "MEMORY.md", "wb") as fh:  # a 1 GB file (sparse): never read
        fh.truncate(1024**3)
    index = ReflectionIndex(tmp_path / "index.db")
    source = memories.Source("claude", "claude:/x", str(base))
    with caplog.at_level(logging.WARNING, logger="reflect_jobs.reflections.memories"):
        done = memories.refresh(index._conn, source)
    assert done["read"] == memories.MAX_FILES
    assert (
        "memory files skipped" in caplog.text
        and "(50 over the 2000-file bound, 1 over 1048576 bytes" in caplog.text
    )
    again = memories.refresh(index._conn, source)  # unchanged: nothing read again
    assert again["read"] == 0 and again["removed"] == 0
    assert len(memories.search(index._conn, [source], "quokka", k=3)) == 3
    index.close()


def test_mcp_search_names_the_memory_file(env, tmp_path, monkeypatch):
    repo, claude, _codex = _setup(env, tmp_path, monkeypatch)
    (claude / "notes.md").write_text("# Flaky login\nRetry the login test only once.\n")
    out = tools.search_tool(
        Path(env["GLOBAL_LEARNINGS_PATH"]),
        "flaky login",
        mode="lexical",
        vectors=False,
        scope=ServerScope.here(str(repo)),
    )
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    memory = [x for x in lines if "memory" in x]
    assert memory and memory[0]["memory"] == str(claude / "notes.md")
    assert memory[0]["harness"] == "claude" and memory[0]["title"] == "Flaky login"
    assert os.path.exists(claude / "notes.md")
