"""Private files (hardening item 14): under the usual umask 022, every directory a real run
creates under ``$REFLECT_HOME`` and the KB is 0700 and every file 0600, and a start repairs
an installation whose files were made readable before.

The runs are real processes (the hook, ``enqueue``, ``drain`` with its reindex), started
from this test with umask 022 so they inherit it, as they would from a login shell.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from support import BIN, write_claude_transcript

from reflect_jobs import perms


def _loose(root: Path) -> list[str]:
    """Entries under ``root`` (itself included) that group or others can access."""
    out = []
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
            out.append(f"{path.relative_to(root.parent)} {oct(stat.S_IMODE(st.st_mode))}")
    return out


def _run_everything(env, tmp_path: Path) -> None:
    """Hook (a failure and a capture), enqueue, drain with reindex, search."""
    hook = str(BIN / "reflect-jobs-hook")
    subprocess.run([hook, "claude"], input=b"not json", env=dict(env), timeout=30, check=True)
    t = write_claude_transcript(
        tmp_path / "t.jsonl", ["No, that's wrong: never mutate the shared config at import time."]
    )
    payload = json.dumps({"session_id": "s1", "transcript_path": str(t)}).encode()
    subprocess.run([hook, "claude"], input=payload, env=dict(env), timeout=30, check=True)
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    env.invoke("search", "shared config", "--mode", "lexical", "--json")


def test_every_file_and_directory_of_a_real_run_is_private_under_umask_022(env, tmp_path):
    previous = os.umask(0o022)
    try:
        _run_everything(env, tmp_path)
    finally:
        os.umask(previous)
    made = {p.name for root in (env.home, env.kb) for p in root.rglob("*")}
    for name in ("reflect.db", "queue.db", "drain.log", "hook-errors.log", "lexical.db"):
        assert name in made, f"the run did not create {name}: the test would prove nothing"
    assert any(n.endswith(".entities.yaml") for n in made) and any(n.endswith(".md") for n in made)
    assert _loose(env.home) + _loose(env.kb) == []


def test_a_start_repairs_files_made_readable_before(env, tmp_path):
    previous = os.umask(0o022)
    try:
        _run_everything(env, tmp_path)
        for root in (env.home, env.kb):  # what an install from before the fix looks like
            for path in [root, *root.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
        script = env.home / "hook.sh"
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)
        env.invoke("drain", "--until-idle", "--max-seconds", "30")
    finally:
        os.umask(previous)
    assert _loose(env.home) + _loose(env.kb) == []
    assert stat.S_IMODE(script.stat().st_mode) == 0o700, "the owner keeps an execute bit"


def test_fix_tree_skips_symlinks_and_counts_changes(tmp_path):
    root = tmp_path / "r"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("x")
    outside = tmp_path / "outside.txt"
    outside.write_text("y")
    outside.chmod(0o644)
    (root / "link").symlink_to(outside)
    root.chmod(0o755)
    (root / "d").chmod(0o755)
    (root / "d" / "f").chmod(0o644)
    assert perms.fix_tree(root) == 3
    assert perms.fix_tree(root) == 0
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644, "a symlink's target is not ours"


def test_private_file_creates_0600_and_never_truncates(tmp_path):
    previous = os.umask(0o022)
    try:
        path = tmp_path / "sub" / "db.sqlite"
        perms.private_file(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        path.write_text("data")
        path.chmod(0o644)
        perms.private_file(path)
        assert path.read_text() == "data" and stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(previous)
