"""No single source takes over what every repository is told (issue 24 item 1).

A global learning is told in *every* repository's session-start block, so one fooled writer
— a session that read a hostile README or tool output — could fill every repository's
general slots with its own lines (12 global CREATEs once took all 6). Two rules, decided
here and nowhere else:

* **A new global learning is pending until confirmed.** It is written repository-scoped —
  ``scope: repo`` and ``repo: <key>`` of the session that wrote it, plus ``proposed_scope:
  global`` in its note (notes are the source of truth; the ledger's ``scope`` column says
  ``repo`` and its ``proposed_scope`` column ``global``, migration 0012) — so it helps where it was learned and reaches nowhere else. It goes global
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

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from reflect_jobs import kb
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
    "is_pending",
    "pending_global_count",
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


class _Scoped(Protocol):
    """What :func:`is_pending` reads: a ``Learning`` or a selected row with its columns."""

    @property
    def scope(self) -> str: ...

    @property
    def proposed_scope(self) -> str | None: ...


def is_pending(row: _Scoped | None) -> bool:
    """Whether a ledger row is a pending global: ``scope`` ``repo`` with ``proposed_scope``
    ``global`` (migration 0012: the row mirrors its note's ``kb.is_pending_global``).

    Args:
        row: A learning row, or a selected row with those two columns (``None``: no such
            learning, not pending).

    Returns:
        True when it waits for a second session or a person to go global.
    """
    return row is not None and row.scope == "repo" and row.proposed_scope == "global"


#: The same test in SQL, for the queries that count and list them.
_PENDING = (Learning.scope == "repo") & (Learning.proposed_scope == "global")


def known_rows(session: Session, ids: list[str]) -> dict[str, Known]:
    """The ledger rows among ``ids``, each with whether it is a pending global.

    Read before the add's write transaction (one short read).

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
            Learning.proposed_scope,
        ).where(Learning.id.in_(sorted(set(ids))))
    )
    return {r.id: Known(r.status, r.session_id, r.scope, r.repo_key, is_pending(r)) for r in rows}


def globals_created(session: Session, session_id: str | None) -> int:
    """How many global learnings (global, or pending global) ``session_id`` has created.

    Args:
        session: An open ledger session.
        session_id: The harness session (``None``: no earlier job can be attributed: 0).

    Returns:
        The number of ledger rows first recorded by that session that are global or
        pending globals.
    """
    if not session_id:
        return 0
    return int(
        session.scalar(
            select(func.count())
            .select_from(Learning)
            .where(Learning.session_id == session_id, (Learning.scope == "global") | _PENDING)
        )
        or 0
    )


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
        pending: The learning is a pending global (:func:`is_pending`).
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
    row.scope, row.repo_key, row.proposed_scope = "global", None, None
    row.updated_at = utcnow()
    return True


def with_pending(
    session: Session, rows: list[dict[str, Any]], limit: int = 500
) -> list[dict[str, Any]]:
    """The review list with the pending global learnings added, each row marked.

    A person's ``review`` shows both queues: what waits to be told at all (``proposed``)
    and what is told only in its repository until someone confirms it goes global. Two
    ledger queries (``learnings.proposed_scope``, migration 0012); no note is read.

    Args:
        session: An open ledger session.
        rows: ``ledger/review.py:list_proposed``'s rows.
        limit: At most this many pending global rows are added.

    Returns:
        ``rows`` and then the active pending globals (oldest first), each with
        ``proposed_scope`` (``"global"`` or ``None``); a pending one's ``why`` says where
        it is told meanwhile.
    """
    ids = [str(row["id"]) for row in rows]
    marked: set[str] = set()
    for start in range(0, len(ids), 500):
        marked.update(
            session.scalars(
                select(Learning.id).where(Learning.id.in_(ids[start : start + 500]), _PENDING)
            )
        )
    out = [{**row, "proposed_scope": "global" if row["id"] in marked else None} for row in rows]
    query = (
        select(Learning)
        .where(Learning.status == ACTIVE, _PENDING)
        .order_by(Learning.created_at, Learning.id)
        .limit(limit)
    )
    for learning in session.scalars(query):
        shown = review.to_dict(learning)
        shown["why"] = [
            f"global: told only in {learning.repo_key} until a second session or a person confirms it"
        ]
        out.append({**shown, "proposed_scope": "global"})
    return out


def pending_global_count(session: Session) -> int:
    """How many active learnings are pending globals, for ``status``: one count query on
    the ledger's ``proposed_scope`` (migration 0012), so a promotion, a rejection or a
    ``forget`` counts at once and no note is read.

    Args:
        session: An open ledger session.

    Returns:
        The count (as many as :func:`with_pending` lists, below its limit).
    """
    return int(
        session.scalar(
            select(func.count()).select_from(Learning).where(Learning.status == ACTIVE, _PENDING)
        )
        or 0
    )
