"""``reflect-jobs db check`` and ``db rebuild``: a damaged SQLite ledger, named and mended.

The ledger is the truth for jobs and money, but the *knowledge* is in the notes: every
learning's id, title, category, type, confidence, scope, repository, status, retirement and
proof sources are in its frontmatter (ARCHITECTURE §7). So a ledger that cannot be restored
from a backup can be rebuilt from the notes: the damaged file is set aside (never deleted),
a fresh one is migrated, and the learnings and their proof are read back in — what the
revision block, retirement and proof counting need to go on as before — with their
confirmations (count and last one) and their own ``forget_after``, so fading and the
hourly sweep go on as before too, and whether each is a pending global
(``proposed_scope``, what ``status`` and ``review`` read).

What the notes do not hold starts empty, and the command says so: job history and cost rows
(the caps' counters in the queue still hold today's budget), session watermarks and chunk
hashes (the next capture of a session reflects it whole again; a finding already in a note
gets the same id and adds proof instead of a second note), the history of each confirmation
(``learning_confirmations``: the count and the last one are back), retire proposals, quota
telemetry, heartbeats and errors. Captures still in the spool are recorded by the next
worker or drain. The reflection store's items live in their own logs and are not touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from reflect_jobs import sqlitefile
from reflect_jobs.kb.parse import NoteError, parse_note
from reflect_jobs.kb.render import confidence_num
from reflect_jobs.kb.store import content_hash, is_pending_global, iter_notes
from reflect_jobs.lifecycle import ACTIVE, LEARNING_STATUSES, is_retired, normalise_learning_type
from reflect_jobs.recall.fading import parse_forget_after

from .db import dispose_all, get_engine, migration_status, session_scope, sqlite_file
from .learnings import add_source
from .models import Learning

#: The label of a ledger file ``db rebuild`` set aside (``reflect.db.damaged-<UTC time>``).
DAMAGED = "damaged"


@dataclass(frozen=True)
class Check:
    """What ``db check`` found.

    Attributes:
        ok: Usable and at the newest migration.
        path: The SQLite file (None for PostgreSQL).
        problem: One line when not ok.
        revision: The schema revision found (None when unreadable).
        head: The newest revision.
    """

    ok: bool
    path: Path | None
    problem: str | None
    revision: str | None
    head: str | None

    def to_json(self) -> dict[str, Any]:
        """The ``db check --json`` object.

        Returns:
            ``{"ok", "path", "problem", "revision", "head"}``.
        """
        return {
            "ok": self.ok,
            "path": str(self.path) if self.path else None,
            "problem": self.problem,
            "revision": self.revision,
            "head": self.head,
        }


def check(url: str) -> Check:
    """Check the ledger: the SQLite file's full integrity, then its schema revision.

    Args:
        url: The ledger's URL.

    Returns:
        The finding; a damaged file names ``db rebuild`` and a restore as the fix.
    """
    path = sqlite_file(url)
    if path is not None:
        why = sqlitefile.damage(path, full=True)
        if why is not None:
            return Check(
                False,
                path,
                f"{path} is damaged ({why}): restore it from a backup, or rebuild it from "
                "the notes with `reflect-jobs db rebuild`",
                None,
                None,
            )
    try:
        cur, head = migration_status(get_engine(url, migrate=False))
    except Exception as exc:  # noqa: BLE001 - PostgreSQL down, a file SQLite refuses…
        return Check(
            False, path, f"cannot open the ledger: {type(exc).__name__}: {exc}", None, None
        )
    if cur != head:
        problem = f"the ledger is at revision {cur}, not {head}: `reflect-jobs db upgrade`"
        return Check(False, path, problem, cur, head)
    return Check(True, path, None, cur, head)


@dataclass(frozen=True)
class Rebuilt:
    """What ``db rebuild`` did: the file set aside, learnings read back, notes skipped."""

    kept: Path | None
    learnings: int
    sources: int
    skipped: list[str]


def rebuild(url: str, kb_path: str | Path) -> Rebuilt:
    """Set the SQLite ledger aside and rebuild it from the notes (see the module docstring).

    Args:
        url: The ledger's ``sqlite:///`` URL.
        kb_path: The KB whose ``documents/`` hold the notes.

    Returns:
        Where the old file was kept, how many learnings and proof sources were read back,
        and the notes that did not parse (``path: why``).

    Raises:
        ValueError: The ledger is not a SQLite file (PostgreSQL is restored from its own
            backups).
    """
    path = sqlite_file(url)
    if path is None:
        raise ValueError("db rebuild works on a SQLite ledger; restore PostgreSQL from a backup")
    dispose_all()
    kept = sqlitefile.set_aside(path, DAMAGED) if path.exists() else None
    get_engine(url)  # a fresh, migrated ledger
    imported = sources = 0
    skipped: list[str] = []
    for note_path in iter_notes(kb_path):
        try:
            note = parse_note(note_path)
            text = note_path.read_text(encoding="utf-8")
        except (NoteError, OSError, UnicodeDecodeError) as exc:
            skipped.append(f"{note_path}: {exc}"[:300])
            continue
        with session_scope(url) as session:
            sources += _learning_from_note(session, note.frontmatter, note_path, text)
        imported += 1
    return Rebuilt(kept, imported, sources, skipped)


def _when(value: object, fallback: datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return fallback


def _maybe_when(value: object) -> datetime | None:
    """A note's time, or ``None`` when it has none or it does not parse."""
    sentinel = datetime.min.replace(tzinfo=UTC)
    when = _when(value, sentinel)
    return None if when == sentinel else when


def _count(value: object) -> int:
    """A note's ``confirmations``: a positive integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _forget_after(value: object) -> datetime | None:
    """A note's ``forget_after`` (stored absolute; a date or a hand-written TTL is read as
    ``recall/fading.py`` reads it), ``None`` when it has none or it does not parse."""
    try:
        return parse_forget_after(value)
    except ValueError:
        return None


def _learning_from_note(session: Session, fm: dict[str, Any], path: Path, text: str) -> int:
    """Insert one note's ledger row and its proof sources; returns how many sources."""
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    status = str(fm.get("status") or ACTIVE).strip().lower()
    status = status if status in LEARNING_STATUSES else ACTIVE
    scope = "repo" if fm.get("scope") == "repo" else "global"
    listed = fm.get("sources")
    found = [str(s) for s in listed if str(s).strip()] if isinstance(listed, list) else []
    source = str(fm.get("source_path") or "")
    if not found and source:
        found = [source]
    proof = fm.get("proof_count")
    updated = _when(fm.get("updated"), mtime)
    row = Learning(
        id=str(fm["id"])[:128],
        title=str(fm["title"])[:1000],
        category=str(fm.get("category") or "Unknown")[:64],
        learning_type=normalise_learning_type(fm.get("learning_type")),
        confidence_num=confidence_num(fm.get("confidence_num")),
        status=status,
        proof_count=proof if isinstance(proof, int) and proof > 0 else max(1, len(found)),
        session_id=str(fm["session_id"])[:200] if fm.get("session_id") else None,
        source_path=source or None,
        note_path=str(path),
        content_hash=content_hash(text),
        retired_reason=str(fm["retired_reason"]) if fm.get("retired_reason") else None,
        superseded_by=str(fm["superseded_by"])[:128] if fm.get("superseded_by") else None,
        created_at=_when(fm.get("created"), mtime),
        updated_at=updated,
        retired_at=updated if is_retired(status) else None,
        scope=scope,
        repo_key=str(fm["repo"])[:300] if scope == "repo" and fm.get("repo") else None,
        # Usage and fading (migration 0011): the note mirrors the ledger's count and last
        # confirmation (``note_edits`` op ``confirm``) and keeps its own TTL; without them
        # every rebuilt learning would look never confirmed, and the next confirmation
        # would write a count of 1 back into its note.
        confirmations=_count(fm.get("confirmations")),
        last_confirmed_at=_maybe_when(fm.get("last_confirmed")),
        forget_after=_forget_after(fm.get("forget_after")),
        # A pending global (migration 0012): the ledger mirrors the note's ``proposed_scope``.
        proposed_scope="global" if is_pending_global(fm) else None,
    )
    session.merge(row)
    session.flush()
    return sum(add_source(session, row.id, s, None) for s in found)
