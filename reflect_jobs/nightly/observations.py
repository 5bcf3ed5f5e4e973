"""Observation notes (the weekly synthesis's output) read back, and the write prompt's block.

Kept apart from :mod:`.synthesis` (which makes a paid call through ``pipeline/paid_call``)
because the prepare stage reads them: the pipeline may import this module, never the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reflect_jobs.recall.block import inert
from reflect_jobs.repo import Repo

MAX_TEXT = 300
BLOCK_MAX = 10
BLOCK_MARKER = "\n\n## Consolidated observations (already known)\n"

__all__ = ["BLOCK_MARKER", "BLOCK_MAX", "MAX_TEXT", "observations", "observations_block"]


def _dir(kb_path: Path, key: str) -> Path:
    return kb_path / "observations" / Repo(key).name


def observations(kb_path: Path, key: str, limit: int = BLOCK_MAX) -> list[dict[str, Any]]:
    """The scope's observation notes, newest first.

    Args:
        kb_path: The KB.
        key: The repository key.
        limit: At most this many.

    Returns:
        ``[{"id", "text", "learnings", "created"}]``; unreadable files are skipped.
    """
    d = _dir(kb_path, key)
    out: list[dict[str, Any]] = []
    if not d.is_dir() or d.is_symlink():
        return out
    for path in d.glob("obs-*.md"):
        try:
            if path.is_symlink() or path.stat().st_size > 64 * 1024:
                continue
            head, _, body = (
                path.read_text(encoding="utf-8").removeprefix("---\n").partition("\n---\n")
            )
            meta = {}
            for line in head.splitlines():
                k, _, v = line.partition(": ")
                meta[k] = json.loads(v)
            out.append(
                {
                    "id": str(meta["id"]),
                    "text": inert(body.strip().split("\n\n", 1)[0], MAX_TEXT),
                    "learnings": [str(x) for x in meta.get("learnings", [])],
                    "created": str(meta.get("created", "")),
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    out.sort(key=lambda o: (o["created"], o["id"]), reverse=True)
    return out[:limit]


def observations_block(kb_path: Path, key: str | None, limit: int = BLOCK_MAX) -> str:
    """The write prompt's block: up to ``limit`` observations of the scope (seed 000).

    Args:
        kb_path: The KB.
        key: The job's repository key (``None``: no block).
        limit: At most this many.

    Returns:
        The block (starting with :data:`BLOCK_MARKER`), or ``""`` when there are none.
    """
    if not key:
        return ""
    found = observations(kb_path, key, limit)
    if not found:
        return ""
    lines = [
        "Patterns already consolidated from earlier sessions of this repository. Do not",
        "restate them as new learnings; UPDATE a listed learning instead when it applies.",
    ]
    lines += [f"- {o['text']} (consolidates {', '.join(o['learnings'][:8])})" for o in found]
    return BLOCK_MARKER + "\n".join(lines) + "\n"
