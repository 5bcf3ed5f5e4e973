"""Stale learnings leave circulation: ledger first, then the note (``restore`` undoes it:
``pipeline/curation.py``).

The add's rule (ARCHITECTURE §3): the ledger commits first in one short transaction, the
note is rewritten after it, never inside it. A process killed in between leaves the note
``active`` while the ledger says ``stale_anchors``; the next session start finds it stale
again (it is withheld anyway) and the task runs again, which rewrites the note (both steps
are idempotent).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reflect_jobs import kb
from reflect_jobs.ledger import control, stale
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.lifecycle import STALE_ANCHORS


def _now() -> str:
    return f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _note_failed(db: str, what: str, exc: Exception) -> None:
    with session_scope(db) as session:
        control.record_error(
            session,
            kind="note_edit_failed",
            severity="warn",
            message=f"{what}: {type(exc).__name__}: {exc}"[:500],
        )


def apply_stale(db: str, reached: list[Any]) -> list[str]:
    """Take learnings out of circulation as ``stale_anchors`` (the worker's task body).

    Args:
        db: The ledger URL.
        reached: ``[[id, [missing, …]], …]`` as the SessionStart hook sent them (hostile
            shapes are skipped: the message came through a queue anyone local can write).

    Returns:
        The ids now ``stale_anchors`` (their notes rewritten when they could be).
    """
    moved: list[tuple[str, str | None, str]] = []
    with session_scope(db) as session:
        for entry in reached if isinstance(reached, list) else []:
            if not (isinstance(entry, (list, tuple)) and len(entry) == 2):
                continue
            ident, missing = entry
            if not isinstance(ident, str) or not isinstance(missing, list):
                continue
            row = stale.mark_stale(session, ident, [str(m) for m in missing][:20])
            if row is not None:
                moved.append((row.id, row.note_path, row.retired_reason or ""))
    for ident, path, reason in moved:
        if not path or not os.path.exists(path):
            continue
        try:
            kb.retire_note(Path(path), status=STALE_ANCHORS, reason=reason, now=_now())
        except (OSError, kb.NoteError) as exc:
            _note_failed(db, f"stale_anchors {ident}", exc)
    return [m[0] for m in moved]
