"""No single source takes over what every repository is told (issue 24 item 1).

A global learning is told in *every* repository's session-start block, so one fooled writer
— a session that read a hostile README or tool output — could fill every repository's
general slots with its own lines (12 global CREATEs once took all 6). Two rules, decided
here and nowhere else:

* **A new global learning is pending until confirmed.** It is written repository-scoped —
  ``scope: repo`` and ``repo: <key>`` of the session that wrote it, plus ``proposed_scope:
  global`` in its note (notes are the source of truth; the ledger's ``scope`` column says
  ``repo``) — so it helps where it was learned and reaches nowhere else. It goes global
  (:func:`promotes`) when *another* session confirms it: a trusted CREATE of the same
  learning, or an UPDATE or semantic twin carrying evidence of the person's or the
  assistant's words; or when a person accepts it (``reflect-jobs review accept ID``).
  One whose evidence is text the session read is also in review (``ledger/review.py``).
* **At most** ``REFLECT_MAX_NEW_GLOBAL_PER_SESSION`` (default 2) **proposals per session**
  across all its jobs; any further new global CREATE is stored plainly repository-scoped.

Without a known repository nothing can be narrowed (the note would be global anyway,
``kb.note_scope``); a harness always records the session's working directory, so that is a
transcript no harness wrote.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from reflect_jobs import kb
from reflect_jobs.fsio import read_regular
from reflect_jobs.kb.parse import MAX_NOTE_BYTES
from reflect_jobs.ledger import review
from reflect_jobs.ledger.learnings import _history
from reflect_jobs.ledger.models import Learning, utcnow
from reflect_jobs.lifecycle import ACTIVE, PROPOSED

__all__ = [
    "Known",
    "ScopeCounts",
    "globals_created",
    "known_rows",
    "note_extra",
    "pending_global_count",
    "pending_note",
    "promote_by_proof",
    "promote_row",
    "promotes",
    "scope_creates",
    "with_pending",
]

#: Whose words a proof's evidence must be to confirm a pending global (as ``review.confirms``).
_CONFIRMING_ORIGINS = ("person", "assistant")


@dataclass(frozen=True)
class Known:
    """What the ledger (and the note) say of a learning that already exists."""

    status: str
    session_id: str | None
    scope: str
    repo_key: str | None
    pending: bool


@dataclass
class ScopeCounts:
    """What :func:`scope_creates` did, for the job's done detail."""

    proposed: int = 0
    narrowed: int = 0
    promoted: int = 0

    def detail(self, cap: int) -> str:
        """The add's done detail words for it (``""`` when nothing happened).

        Args:
            cap: ``REFLECT_MAX_NEW_GLOBAL_PER_SESSION``.

        Returns:
            E.g. `` proposed_global=2 (…) narrowed_to_repo=3 (global cap 2)``.
        """
        out = ""
        if self.proposed:
            out += f" proposed_global={self.proposed} (told in its repository until confirmed)"
        if self.narrowed:
            out += f" narrowed_to_repo={self.narrowed} (global cap {cap})"
        if self.promoted:
            out += f" promoted_global={self.promoted}"
        return out


def pending_note(note_path: str | None) -> bool:
    """Whether a note is a pending global: ``scope: repo`` with ``proposed_scope: global``.

    Args:
        note_path: The note file (``None``, missing or unparsable: not pending).

    Returns:
        True when the note waits for a second session or a person to go global.
    """
    if not note_path:
        return False
    try:
        # A regular file, not a link, bounded (kb/parse.py): a synced documents/ is untrusted.
        raw = read_regular(note_path, max_bytes=MAX_NOTE_BYTES).decode("utf-8", "replace")
        if kb.PROPOSED_SCOPE not in raw:
            return False  # the common case: no YAML parse
        fm = kb.parse_note(raw).frontmatter
    except (OSError, kb.NoteError):
        return False
    return kb.is_pending_global(fm)


def known_rows(session: Session, ids: list[str]) -> dict[str, Known]:
    """The ledger rows among ``ids``, each with whether its note is a pending global.

    Read before the add's write transaction: the notes are read here, never under its lock.

    Args:
        session: An open ledger session.
        ids: Learning ids (CREATE ids, twin and UPDATE targets).

    Returns:
        ``id -> Known`` for the ids that have a row.
    """
    if not ids:
        return {}
    rows = session.execute(
        select(
            Learning.id,
            Learning.status,
            Learning.session_id,
            Learning.scope,
            Learning.repo_key,
            Learning.note_path,
        ).where(Learning.id.in_(sorted(set(ids))))
    )
    return {
        r[0]: Known(r[1], r[2], r[3], r[4], r[3] == "repo" and pending_note(r[5])) for r in rows
    }


def globals_created(session: Session, session_id: str | None) -> int:
    """How many global learnings (global, or pending global) ``session_id`` has created.

    Args:
        session: An open ledger session.
        session_id: The harness session (``None``: no earlier job can be attributed: 0).

    Returns:
        The number of ledger rows first recorded by that session that are global or whose
        note proposes them global.
    """
    if not session_id:
        return 0
    rows = session.execute(
        select(Learning.scope, Learning.note_path).where(Learning.session_id == session_id)
    )
    return sum(1 for scope, path in rows if scope == "global" or pending_note(path))


def promotes(
    pending: bool,
    *,
    first_session: str | None,
    session_id: str | None,
    trusted: bool,
    origin: object = None,
    proof: bool,
) -> bool:
    """Whether a confirmation makes a pending global learning global (the one rule).

    Args:
        pending: The learning is a pending global (:func:`pending_note`).
        first_session: The session that wrote it first (the ledger row's).
        session_id: The confirming job's session.
        trusted: A CREATE with no review reasons, or a proof from a model writer.
        origin: The proof's checked ``evidence_origin`` (``None`` without evidence).
        proof: An UPDATE or a semantic twin (it must carry evidence of the person's or the
            assistant's words) rather than a CREATE of the same learning.

    Returns:
        True when another session vouches for it.
    """
    if not (pending and trusted and session_id and first_session != session_id):
        return False
    return not proof or origin in _CONFIRMING_ORIGINS


def promote_by_proof(
    session: Session,
    row: Learning | None,
    known: Known | None,
    session_id: str | None,
    trusted: bool,
    origin: object,
    why: str | None,
    job_id: str | None,
) -> bool:
    """The add's proof path (an UPDATE or a semantic twin): promote the row when
    :func:`promotes` says so.

    Args:
        session: The add's write session.
        row: The learning the proof is for (``None``: no such learning).
        known: :func:`known_rows`' entry for it, read before the transaction.
        session_id: The job's session.
        trusted: The proof comes from a model writer (or a trusted twin CREATE).
        origin: The proof's checked ``evidence_origin``.
        why: The proof's reason (for the history).
        job_id: The add job.

    Returns:
        True when it was promoted (the caller owes the note a ``promote`` edit).
    """
    if row is None or not promotes(
        known is not None and known.pending,
        first_session=row.session_id,
        session_id=session_id,
        trusted=trusted,
        origin=origin,
        proof=True,
    ):
        return False
    return promote_row(session, row, reason=f"confirmed global: {why}", job_id=job_id)


def scope_creates(
    creates: list[dict[str, Any]],
    *,
    known: dict[str, Known],
    ids: list[str],
    session_id: str | None,
    already: int,
    cap: int,
) -> ScopeCounts:
    """Decide each CREATE's scope, in place: global, pending global, or repository-scoped.

    A CREATE asking for ``global`` (with its session's repository known) becomes a pending
    global — ``scope: repo`` and ``proposed_scope: global`` — while the session has made
    fewer than ``cap``, else plainly repository-scoped. A CREATE of a learning that is
    already global stays global; of a pending one, it promotes it when :func:`promotes`
    says so, else the learning stays pending in its first repository.

    Args:
        creates: The learnings about to be written, in the answer's order (each with its
            ``repo`` key when the session's repository is known, and ``review``: its
            review reasons).
        known: :func:`known_rows` of their ids.
        ids: Each learning's note id (in the order of ``creates``).
        session_id: The job's session.
        already: Global and pending global learnings the session created in earlier jobs.
        cap: ``REFLECT_MAX_NEW_GLOBAL_PER_SESSION``.

    Returns:
        How many were proposed, narrowed and promoted.
    """
    counts, used = ScopeCounts(), already
    for learning, lid in zip(creates, ids, strict=True):
        if kb.note_scope(learning) != "global":
            continue
        if not str(learning.get("repo") or "").strip():
            used += int(lid not in known)  # nothing to narrow it to
            continue
        row = known.get(lid)
        if row is not None and row.scope == "global":
            continue  # already global: written again, not a new one
        if row is not None and row.pending:
            if promotes(
                True,
                first_session=row.session_id,
                session_id=session_id,
                trusted=not learning.get("review"),
                proof=False,
            ):
                counts.promoted += 1
                continue
            learning.update(scope="repo", repo=row.repo_key or learning["repo"])
            learning[kb.PROPOSED_SCOPE] = "global"
            continue
        learning["scope"] = "repo"
        if used < cap:
            learning[kb.PROPOSED_SCOPE] = "global"
            used += 1
            counts.proposed += 1
        else:
            counts.narrowed += 1
    return counts


def note_extra(learning: dict[str, Any]) -> dict[str, object] | None:
    """The extra frontmatter a CREATE's note gets: ``proposed_scope`` when it is pending.

    Args:
        learning: A learning :func:`scope_creates` decided.

    Returns:
        ``{"proposed_scope": "global"}`` or ``None``.
    """
    return {kb.PROPOSED_SCOPE: "global"} if learning.get(kb.PROPOSED_SCOPE) else None


def promote_row(session: Session, row: Learning, *, reason: str, job_id: str | None) -> bool:
    """Make a pending global learning's ledger row global (a history snapshot first).

    The note follows after the commit (``note_edits.promote``).

    Args:
        session: An open write session.
        row: The learning (read in the caller's transaction).
        reason: Why (stored in its history).
        job_id: The job that confirmed it, if any (``None``: a person).

    Returns:
        True when it was made global (False: already global, or retired).
    """
    if row.scope == "global" or row.status not in (ACTIVE, PROPOSED):
        return False
    _history(session, row, "promoted", reason[:1000], job_id)
    row.scope, row.repo_key = "global", None
    row.updated_at = utcnow()
    return True


def with_pending(
    session: Session,
    rows: list[dict[str, Any]],
    limit: int = 500,
    *,
    kb_path: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """The review list with the pending global learnings added, each row marked.

    A person's ``review`` shows both queues: what waits to be told at all (``proposed``)
    and what is told only in its repository until someone confirms it goes global. Reads
    the notes of the active repository-scoped learnings (a person's command, not a hook);
    given ``kb_path`` (the dashboard, loaded often), only the notes the context store flags
    (:func:`pending_global_count` says why and what it costs).

    Args:
        session: An open ledger session.
        rows: ``ledger/review.py:list_proposed``'s rows.
        limit: At most this many pending global rows are added.
        kb_path: The KB root whose context store narrows the notes read (``None``: every
            active repository-scoped learning's note is read).

    Returns:
        ``rows`` and then the active pending globals (oldest first), each with
        ``proposed_scope`` (``"global"`` or ``None``); a pending one's ``why`` says where
        it is told meanwhile.
    """
    out: list[dict[str, Any]] = []
    for row in rows:
        path = row.get("note_path")
        pending = pending_note(str(path) if path else None)
        out.append({**row, "proposed_scope": "global" if pending else None})
    ids = _flagged_ids(kb_path) if kb_path is not None else None
    for learning in _active_pending(session, limit, ids):
        shown = review.to_dict(learning)
        shown["why"] = [
            f"global: told only in {learning.repo_key} until a second session or a person confirms it"
        ]
        out.append({**shown, "proposed_scope": "global"})
    return out


#: More flagged ids than this and the ledger is scanned instead (one query's parameters).
_MAX_FLAGGED = 10_000


def _flagged_ids(kb_path: str | os.PathLike[str]) -> list[str] | None:
    """The ids the context store flags ``pending_global``; ``None`` when there is no store,
    it predates the column, it cannot be read, or it flags more than :data:`_MAX_FLAGGED`."""
    from reflect_jobs.recall import store

    ids: list[str] | None = None
    with contextlib.suppress(sqlite3.Error):
        conn = store.open_for_read(store.store_path(kb_path))
        if conn is not None:
            try:
                ids = store.pending_global_ids(conn)
            finally:
                conn.close()
    return ids if ids is None or len(ids) <= _MAX_FLAGGED else None


def _active_pending(
    session: Session, limit: int, ids: list[str] | None = None
) -> Iterator[Learning]:
    """The active pending global learnings, oldest first: the ledger's active
    repository-scoped rows (among ``ids`` when given) whose note :func:`pending_note` says
    so (each such note read)."""
    found = 0
    query = (
        select(Learning)
        .where(Learning.status == ACTIVE, Learning.scope == "repo")
        .order_by(Learning.created_at, Learning.id)
    )
    if ids is not None:
        if not ids:
            return
        query = query.where(Learning.id.in_(ids))
    for learning in session.scalars(query):
        if found >= limit:
            return
        if pending_note(learning.note_path):
            found += 1
            yield learning


def pending_global_count(session: Session, kb_path: str | os.PathLike[str]) -> int:
    """How many active learnings are pending globals, for ``status`` (kept fast).

    :func:`with_pending` reads the note of every active repository-scoped learning — fine
    for a person's ``review``, too slow for ``status`` at thousands of notes. The context
    store already holds each note's flag (``pending_global``, set by the indexer with the
    same test, ``kb.is_pending_global``): a partial-index read of the flagged ids, kept
    only where the ledger still has them active and repository-scoped (so a promotion, a
    rejection or a ``forget`` counts at once, before the worker's refresh). No note is
    read. A store that does not exist or predates the column falls back to
    :func:`with_pending`'s reader.

    Args:
        session: An open ledger session.
        kb_path: The KB root (its context store).

    Returns:
        The count (a pending learning written since the worker's last refresh of the store
        is counted once the refresh ran).
    """
    ids = _flagged_ids(kb_path)
    if ids is None:
        return sum(1 for _ in _active_pending(session, limit=1_000_000))
    count = 0
    for start in range(0, len(ids), 500):
        count += int(
            session.scalar(
                select(func.count())
                .select_from(Learning)
                .where(
                    Learning.id.in_(ids[start : start + 500]),
                    Learning.status == ACTIVE,
                    Learning.scope == "repo",
                )
            )
            or 0
        )
    return count
