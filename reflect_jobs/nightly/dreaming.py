"""Dreaming: the repository's strongest learnings promoted into Claude Code's MEMORY.md.

Promoted: learnings of the repository that are told (``active``; not ``proposed``, retired,
reverted or demoted), verified (their evidence quote was found in the session), confirmed
(proof from two or more sources) and still on disk with a told status (a forgotten note is
gone, a dormant one says so). Ranked by proof, confidence and recency; the managed section's
budget (``REFLECT_MEMORY_LINES``) decides how many (:mod:`.memory_md`). A learning that stops
qualifying leaves the section at the next run; nothing changed leaves the file byte-identical.

Only the promoter writes (``REFLECT_PROMOTE`` and the promoter lease, :mod:`.state`); a
machine that is not the promoter never opens the file for writing.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from reflect_jobs import kb
from reflect_jobs.fsio import TooLarge, atomic_write, read_regular
from reflect_jobs.invisible import strip_invisible
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.lifecycle import is_told
from reflect_jobs.recall import fading, refresh
from reflect_jobs.recall.block import inert

from .memory_md import MAX_SECTION_LINES, bullet, splice

#: Confirmed: proof from at least this many sources.
MIN_PROOF = 2
MAX_BULLET_CHARS = 200
_READ_MAX = 4 * 1024 * 1024

__all__ = ["Promotion", "eligible", "promote"]


@dataclass
class Promotion:
    """What dreaming did for one repository (for the report and the diary)."""

    path: str = ""
    status: str = ""  # written | unchanged | refused | not_promoter | no_file | dry_run | failed
    detail: str = ""
    ids: tuple[str, ...] = ()
    repaired: str = ""


def _note_told(path: str | None) -> bool:
    if not path or not os.path.isfile(path):
        return False  # forgotten (moved to .forgotten/) or gone
    try:
        fm = kb.parse_note(Path(path)).frontmatter
    except (OSError, kb.NoteError):
        return False
    # Not dormant (recall/fading.py): what a session start does not tell, MEMORY.md does not
    # either (Claude Code loads it at every session start).
    awake = refresh.awake_of(fm)
    asleep = fm.get("dormant") or fading.is_dormant(awake, fading.unused_days(), time.time())
    return is_told(fm.get("status")) and not asleep


def eligible(db_url: str, key: str, limit: int) -> list[tuple[str, str]]:
    """The learnings to promote for a repository, best first.

    Args:
        db_url: The ledger.
        key: The repository key.
        limit: At most this many.

    Returns:
        ``[(learning id, bullet text)]``.
    """
    with session_scope(db_url, readonly=True) as session:
        rows = session.execute(
            select(Learning.id, Learning.title, Learning.note_path, Learning.status)
            .where(
                Learning.repo_key == key,
                Learning.status == "active",
                Learning.is_latest.is_(True),
                Learning.proof_count >= MIN_PROOF,
                Learning.evidence.is_not(None),
                Learning.evidence != "",
            )
            .order_by(
                Learning.proof_count.desc(),
                Learning.confidence_num.desc(),
                Learning.updated_at.desc(),
                Learning.id,
            )
            .limit(limit * 3)
        ).all()
    out: list[tuple[str, str]] = []
    for lid, title, note_path, status in rows:
        if len(out) >= limit:
            break
        if not is_told(status) or not _note_told(note_path):
            continue
        rule = ""
        with contextlib.suppress(OSError, kb.NoteError, TypeError):  # TypeError: no path
            rule = str(kb.parse_note(Path(str(note_path))).frontmatter.get("rule") or "")
        # MEMORY.md is read as instructions: one visible line, no tag, no hidden characters
        out.append((lid, inert(strip_invisible(rule or title), MAX_BULLET_CHARS)))
    return out


def promote(
    target: Path, chosen: list[tuple[str, str]], *, max_lines: int, dry_run: bool
) -> Promotion:
    """Rewrite the managed section of ``target`` in place (only the promoter calls this).

    Args:
        target: ``…/projects/<project>/memory/MEMORY.md``.
        chosen: :func:`eligible`'s answer.
        max_lines: ``REFLECT_MEMORY_LINES``.
        dry_run: Compute, write nothing.

    Returns:
        What happened.
    """
    out = Promotion(path=str(target))
    real = Path(os.path.realpath(target))  # a MEMORY.md linked into dotfiles is written there
    try:
        current = read_regular(real, max_bytes=_READ_MAX, follow=True).decode(
            "utf-8", errors="surrogateescape"
        )
    except FileNotFoundError:
        current = None
    except TooLarge:
        out.status, out.detail = "refused", "MEMORY.md is over 4 MiB: over Claude Code's limit"
        return out
    except OSError as exc:
        out.status, out.detail = "failed", f"{type(exc).__name__}: {exc}"
        return out
    bullets = [bullet(text, lid) for lid, text in chosen[:MAX_SECTION_LINES]]
    result = splice(current, bullets, max_lines=max_lines)
    out.ids = tuple(lid for lid, _ in chosen[: result.lines])
    out.repaired = result.repaired
    if result.refused:
        out.status, out.detail = "refused", result.refused
        return out
    if not result.changed:
        out.status = "unchanged" if current is not None else "no_file"
        return out
    if dry_run:
        out.status = "dry_run"
        return out
    try:
        real.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        mode = (real.stat().st_mode & 0o777) if current is not None else 0o600
        atomic_write(real, result.text.encode("utf-8", errors="surrogateescape"), mode=mode)
    except OSError as exc:
        out.status, out.detail = "failed", f"{type(exc).__name__}: {exc}"
        return out
    out.status = "written"
    return out
