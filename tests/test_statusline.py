"""``reflect-jobs statusline``: the open items at a glance, from Claude Code's statusLine JSON,
without click or the package's heavy modules, from a cache the logs' stats invalidate; and
``install hooks --statusline`` never replacing a person's own status line (issue 26 item 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from recall_support import make_repo

from reflect_jobs.cli import main
from reflect_jobs.statusline import payload_dir, segment

ENTRY = (
    "import sys; sys.argv = ['reflect-jobs', 'statusline', *sys.argv[1:]];"
    "from reflect_jobs.entry import main; rc = main();"
    "heavy = [m for m in ('click', 'sqlalchemy', 'huey', 'structlog', 'reflect_jobs.cli')"
    " if m in sys.modules];"
    "sys.stderr.write(json.dumps(heavy) if 'json' in sys.modules else '[]'); sys.exit(rc)"
)


def _line(env, payload: object, *args: str) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """Run the console script's path (the entry module) as Claude Code does: JSON on stdin."""
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    proc = subprocess.run(
        [sys.executable, "-c", "import json;" + ENTRY, *args],
        input=raw,
        env=dict(env),
        cwd=Path(env["REFLECT_HOME"]).parent,  # not a repository: the fallback shows nothing
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads(proc.stderr or "[]")


def _add(env, repo: Path, kind: str, title: str) -> str:  # type: ignore[no-untyped-def]
    out = env.run("reflections", "add", "--kind", kind, "--title", title, "--repo", str(repo))
    return out.stdout.strip()


def test_the_payload_names_the_directory_and_the_segment_reads_short():
    assert payload_dir(b'{"workspace": {"current_dir": "/a"}, "cwd": "/b"}') == "/a"
    assert payload_dir(b'{"cwd": "/b"}') == "/b"
    assert payload_dir(b"not json") is None and payload_dir(b"[1]") is None
    assert payload_dir(b'{"workspace": "x", "cwd": 3}') is None
    assert segment({"open": 2, "handoffs": 1, "store": True}) == "2 open · 1 handoff"
    assert segment({"open": 3, "handoffs": 2, "store": True}) == "3 open · 2 handoffs"
    assert segment({"open": 0, "handoffs": 0, "store": True}) == "0 open"
    assert segment({"open": 0, "handoffs": 0, "store": False}) == "" and segment(None) == ""


def test_counts_follow_the_logs_and_stay_light(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    (repo / "src").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    payload = {"workspace": {"current_dir": str(repo / "src")}, "cwd": str(outside)}
    assert _line(env, payload) == ("", [])  # a repository whose store was never used
    _add(env, repo, "action", "Wire the retry budget")
    _add(env, repo, "handoff", "Finish the pnpm migration")
    out, heavy = _line(env, payload)
    assert out == "2 open · 1 handoff\n" and heavy == []  # no click, no SQLAlchemy
    cache = Path(env["REFLECT_HOME"]) / "statusline.json"
    assert cache.stat().st_mode & 0o777 == 0o600
    # A change to the logs (another item) is seen at once: the cache is keyed by their stats.
    done = _add(env, repo, "question", "Does CI still need the flag?")
    assert _line(env, payload)[0] == "3 open · 1 handoff\n"
    env.run("reflections", "done", done, "--note", "answered in the README", "--repo", str(repo))
    out, heavy = _line(env, payload)
    assert out == "2 open · 1 handoff\n" and heavy == []
    # Outside a repository, bad input: nothing printed, never an error.
    assert _line(env, {"cwd": str(outside)}) == ("", [])
    assert _line(env, "{not json", "--cwd", str(outside))[0] == ""
    assert _line(env, "\x00" * 100)[0] == ""  # falls back to its own directory


def test_status_line_reads_the_same_cache(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    _add(env, repo, "action", "Wire the retry budget")
    assert _line(env, {"cwd": str(repo)})[0] == "1 open\n"
    cache = Path(env["REFLECT_HOME"]) / "statusline.json"
    data = json.loads(cache.read_text())
    (entry,) = data["repos"].values()
    entry["open"] = 7  # a count only the cache holds: status --line must show it
    cache.write_text(json.dumps(data))
    line = subprocess.run(
        [str(Path(sys.executable).parent / "reflect-jobs"), "status", "--line"],
        cwd=repo,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert line.returncode == 0 and " open:7" in line.stdout, line.stderr
    assert _line(env, {"cwd": str(repo)})[0] == "7 open\n"


def test_install_sets_a_statusline_only_when_none_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("REFLECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GLOBAL_LEARNINGS_PATH", str(tmp_path / "kb"))
    settings = tmp_path / "settings.json"
    runner = CliRunner()
    args = ["install", "hooks", "--harness", "claude", "--settings", str(settings)]
    out = runner.invoke(main, [*args, "--statusline"])
    assert out.exit_code == 0, out.output
    doc = json.loads(settings.read_text())
    assert doc["statusLine"]["type"] == "command"
    assert doc["statusLine"]["command"].endswith("reflect-jobs statusline")
    assert "statusLine set in" in out.output
    again = runner.invoke(main, [*args, "--statusline"])
    assert "statusLine unchanged" in again.output
    gone = runner.invoke(main, [*args, "--uninstall"])
    assert gone.exit_code == 0 and "statusLine removed" in gone.output
    assert "statusLine" not in json.loads(settings.read_text())

    # A person's own status line is never replaced: the answer says how to compose them.
    mine = {"type": "command", "command": "~/.claude/my-line.sh"}
    settings.write_text(json.dumps({"statusLine": mine}))
    before = settings.read_text()
    out = runner.invoke(main, [*args, "--statusline"])
    assert out.exit_code == 0, out.output
    assert json.loads(settings.read_text())["statusLine"] == mine
    assert "left alone" in out.output and "~/.claude/my-line.sh" in out.output
    assert "reflect-jobs statusline" in out.output
    runner.invoke(main, [*args, "--uninstall"])
    assert json.loads(settings.read_text())["statusLine"] == mine
    assert os.path.exists(settings) and before != ""


def test_the_worker_keeps_the_cached_counts_current(env, tmp_path):
    from reflect_jobs.statusline import refresh_cache

    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    _add(env, repo, "action", "Wire the retry budget")
    assert _line(env, {"cwd": str(repo)})[0] == "1 open\n"
    _add(env, repo, "handoff", "Finish the pnpm migration")  # the log moved
    assert refresh_cache(dict(env)) == 1  # what tasks.refresh_reflections runs each minute
    cache = json.loads((Path(env["REFLECT_HOME"]) / "statusline.json").read_text())
    (entry,) = cache["repos"].values()
    assert (entry["open"], entry["handoffs"]) == (2, 1)
    assert refresh_cache(dict(env)) == 0  # fresh now: nothing retaken
