"""Helpers for the recall tests: real git directories, real notes, a real reindex."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import recent

from reflect_jobs import kb
from reflect_jobs.index import maintenance


def make_repo(path: Path, origin: str | None = None) -> Path:
    """A directory that looks like a git checkout to a reader of ``.git`` (no git spawned)."""
    (path / ".git").mkdir(parents=True, exist_ok=True)
    config = "[core]\n\trepositoryformatversion = 0\n"
    if origin is not None:
        config += (
            f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        )
    (path / ".git" / "config").write_text(config, encoding="utf-8")
    return path


def learning(title: str, rule: str, *, scope: str = "repo", repo: str | None = None, **kw):  # type: ignore[no-untyped-def]
    """A normalised learning dict as the add stage hands it to the KB."""
    out = {
        "title": title,
        "rule": rule,
        "category": "Tools",
        "key_insight": kw.pop("key_insight", rule),
        "problem": "",
        "root_cause": "",
        "fix": "",
        "confidence_num": kw.pop("confidence_num", 0.7),
        "tags": [],
        "entities": [],
        "causal_relations": [],
        "body": "## Context\nsomething happened",
        "scope": scope,
    }
    if repo is not None:
        out["repo"] = repo
    out.update(kw)
    return out


def add_note(kb_root: Path, item: dict, *, updated: str | None = None) -> kb.NoteFile:
    """Write one note as the add stage does (written a day ago unless ``updated``)."""
    updated = updated or recent()
    return kb.write_learning(
        kb_root, item, created=updated, updated=updated, source_path="/t.jsonl", session_id="s"
    )


def reindex(kb_root: Path, *, force: bool = False) -> maintenance.ReindexStats:
    """The lexical-only reindex every add ends in; it also refreshes the context store."""
    return maintenance.reindex(kb_root, force=force, vectors=False)


#: What the hook path must never import (ARCHITECTURE §13: stdlib only, milliseconds).
HEAVY_MODULES = ("sqlalchemy", "torch", "nano_graphrag", "yaml", "huey", "structlog", "click")


def session_start_in_process(
    env, cwd: Path, *, also_heavy: tuple[str, ...] = ()
) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """Run ``hook.main(['claude'])`` on a SessionStart payload in a fresh interpreter.

    Returns the ``additionalContext`` it printed and which of :data:`HEAVY_MODULES` (and
    ``also_heavy``) it had imported by the end (the hook path must import none of them).
    """
    heavy = HEAVY_MODULES + also_heavy
    code = (
        "import io, json, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps("
        f"{{'hook_event_name': 'SessionStart', 'cwd': {str(cwd)!r}}}).encode()))\n"
        "from reflect_jobs import hook\n"
        "hook.main(['claude'])\n"
        f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
        "print(json.dumps(heavy), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=dict(env), capture_output=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    imported = json.loads(proc.stderr.decode().strip().splitlines()[-1])
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"], imported
