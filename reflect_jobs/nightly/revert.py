"""Revert demotion (seed 003): a session's learnings leave when a commit it made is reverted.

``prepare`` records the commits a session's tool output shows it created
(``prepare_stats["commits"]``, :func:`.commits.session_commits`). Here each repository's recent
history is read once, bounded (:func:`.commits.reverts`), for ``This reverts commit <id>``;
a reverted id that starts with (or is) one a session recorded demotes that session's
learnings of the repository: status ``reverted`` (a retired status: never told, out of search
and of MEMORY.md) with ``is_latest = 0``, the reverting commit in the reason and a history
snapshot (``ledger/learnings.retire``, as ``ledger/contradiction.demote`` does), then the
note's frontmatter says so too. Both steps are
idempotent and re-run every night over the window, so a run killed between them is healed by
the next.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from reflect_jobs import kb
from reflect_jobs.ledger import learnings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.lifecycle import is_retired

from .analyzer import RepoScan
from .commits import Revert

__all__ = ["Demotion", "demote", "match"]


@dataclass
class Demotion:
    """One reverted session commit and the learnings it took with it."""

    commit: str
    reverted_by: str
    session_id: str
    learning_ids: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)


def match(scan: RepoScan, found: list[Revert]) -> list[Demotion]:
    """Pair reverts with the sessions whose recorded commits they undo (pure).

    Args:
        scan: The repository's sessions (their ``commits``).
        found: The reverts its history holds.

    Returns:
        One :class:`Demotion` per (reverted commit, session), in history order.
    """
    out: list[Demotion] = []
    for rev in found:
        for info in scan.sessions.values():
            for short in info.commits:
                a, b = rev.reverted, short
                if min(len(a), len(b)) >= 7 and (a.startswith(b) or b.startswith(a)):
                    out.append(Demotion(short, rev.commit, info.session_id))
    return out


def demote(db_url: str, key: str, demotions: list[Demotion], *, dry_run: bool) -> int:
    """Demote the sessions' learnings of the repository; returns how many changed now.

    Args:
        db_url: The ledger.
        key: The repository key (only its learnings are touched).
        demotions: From :func:`match`; each gets its learnings' ids and titles.
        dry_run: Find, change nothing.

    Returns:
        The number of learnings demoted by this call (already demoted ones are listed, not
        counted).
    """
    changed = 0
    notes: list[tuple[str, str]] = []
    now = datetime.now(UTC).isoformat()
    for d in demotions:
        reason = f"reverted: commit {d.commit} was reverted by {d.reverted_by[:12]}"
        with session_scope(db_url, readonly=dry_run) as session:
            rows = list(
                session.scalars(
                    select(Learning).where(
                        Learning.session_id == d.session_id, Learning.repo_key == key
                    )
                )
            )
            for row in rows:
                d.learning_ids.append(row.id)
                d.titles.append(row.title)
                if dry_run:
                    continue
                if learnings.retire(session, row.id, reason=reason, status="reverted"):
                    row.is_latest = (
                        False  # no longer the latest word (seed 003), as a contradiction
                    )
                    changed += 1
                if row.status == "reverted" and row.note_path:
                    notes.append((row.note_path, row.retired_reason or reason))
    for path, reason in notes:  # after the commit: the note says what the ledger says
        if not os.path.isfile(path):
            continue
        try:
            fm = kb.parse_note(Path(path)).frontmatter
            if not is_retired(fm.get("status")):
                kb.retire_note(Path(path), status="reverted", reason=reason, now=now)
        except (OSError, kb.NoteError):
            continue
    return changed
