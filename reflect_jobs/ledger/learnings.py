"""Learnings, their proof, their history, and the chunk hashes behind them.

Upserts keyed by the stable note id (``lrn-<slug>-<hash6>``): re-adding the same learning
updates its row and never inserts a duplicate (SPEC-drain §4.2's "re-drains duplicate ledger rows"
cannot happen). Proof is one row per distinct source, so an UPDATE is idempotent per source.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..lifecycle import ACTIVE, ARCHIVED, DEFAULT_LEARNING_TYPE, PROPOSED, is_retired
from ..sanitize import bounded
from .db import rows_affected
from .models import ChunkHash, Learning, LearningHistory, LearningSource, utcnow

CHUNK_HASH_TTL_DAYS = 30


def snapshot(row: Learning) -> dict[str, Any]:
    """Every column of a learning row as JSON-able values, for its history.

    Args:
        row: The learning as it is before the change.

    Returns:
        ``{column: value}``, datetimes as ISO strings.
    """
    return {
        c.name: (v.isoformat() if isinstance(v, datetime) else v)
        for c in Learning.__table__.columns
        for v in [getattr(row, c.name)]
    }


def _history(
    session: Session, row: Learning, change: str, reason: str | None, job_id: str | None
) -> None:
    session.add(
        LearningHistory(
            learning_id=row.id,
            change_type=change,
            snapshot=snapshot(row),
            reason=reason,
            job_id=job_id,
            at=utcnow(),
        )
    )


SOURCE_MAX = 512  # learning_sources.source is VARCHAR(512)


def source_key(source: str) -> str:
    """The proof key stored for ``source``: clean and at most :data:`SOURCE_MAX` characters.

    A transcript path longer than the column failed the add's commit on PostgreSQL (and
    every retry of it); the bounded key keeps distinct long paths distinct.

    Args:
        source: A source, usually a transcript path.

    Returns:
        :func:`reflect_jobs.sanitize.bounded` of it.
    """
    return bounded(source, SOURCE_MAX)


def add_source(session: Session, learning_id: str, source: str, job_id: str | None) -> bool:
    """Record ``source`` as proof; False when it was already recorded (idempotent).

    Args:
        session: An open write session; the insert runs in a savepoint.
        learning_id: The learning the source confirms.
        source: The source (usually a transcript path); one row per learning and source.
        job_id: The job that found it, if any.

    Returns:
        ``True`` when a new source row was added; ``False`` when it existed already or a
        concurrent insert of it won.
    """
    source = source_key(source)
    exists = session.scalars(
        select(LearningSource.id).where(
            LearningSource.learning_id == learning_id, LearningSource.source == source
        )
    ).first()
    if exists is not None:
        return False
    try:
        with session.begin_nested():
            session.add(
                LearningSource(learning_id=learning_id, source=source, job_id=job_id, at=utcnow())
            )
    except IntegrityError:
        return False
    return True


def sources(session: Session, learning_id: str) -> list[str]:
    """The sources recorded as proof of a learning.

    Args:
        session: An open ledger session.
        learning_id: The learning's id.

    Returns:
        The sources in the order they were recorded.
    """
    return list(
        session.scalars(
            select(LearningSource.source)
            .where(LearningSource.learning_id == learning_id)
            .order_by(LearningSource.id)
        )
    )


@dataclass(frozen=True)
class UpsertResult:
    """What :func:`upsert_learning` did: the id, whether the row is new, its proof count."""

    learning_id: str
    created: bool
    proof_count: int


def upsert_learning(
    session: Session,
    *,
    learning_id: str,
    title: str,
    category: str,
    learning_type: str,
    confidence_num: float,
    note_path: str,
    content_hash: str,
    source: str,
    session_id: str | None,
    signal_hash: str | None,
    job_id: str | None,
    scope: str = "global",
    repo_key: str | None = None,
    status: str | None = None,
    evidence: str | None = None,
    evidence_origin: str | None = None,
    anchors: list[dict[str, str]] | None = None,
    forget_after: datetime | None = None,
    proposed_scope: str | None = None,
) -> UpsertResult:
    """Insert a learning, or treat a re-add of the same id as new proof from ``source``.

    A re-add snapshots the row into its history, points it at the new note file and hash,
    takes the given ``status`` (without one: re-activates it if it was retired), records
    the latest evidence and anchors, and adds one proof when ``source`` is new; its title,
    category, type and confidence stay as first written.

    Args:
        session: An open write session; the row is read ``FOR UPDATE``.
        learning_id: The note's content-derived id (``lrn-<slug>-<hash6>``).
        title: The learning's title (cut to 1000 characters).
        category: Its category; empty means ``Unknown``.
        learning_type: Its type; empty means ``bug-fix``.
        confidence_num: Confidence in [0, 1].
        note_path: Where the note was written.
        content_hash: The sha256 of the note's bytes.
        source: The transcript it came from (recorded as proof).
        session_id: The harness session, if known.
        signal_hash: The hash of the signal set that produced it, if any.
        job_id: The job that wrote it, if any.
        scope: ``repo`` or ``global`` (ARCHITECTURE §13); a re-add records the latest.
        repo_key: The repository a ``repo`` learning belongs to.
        status: The status the note was written with (``active``, ``proposed`` — the
            review queue, ``ledger/review.py`` — or ``rejected``); ``None``: active.
        evidence: The verbatim quote of the slice that proves it (ARCHITECTURE §6).
        evidence_origin: Whose words the quote is: ``person``, ``assistant``, ``tool``.
        anchors: The ``{path, symbol?}`` it names that exist in its repository.
        forget_after: Its own TTL, absolute (seed 003; the hourly sweep forgets it then);
            ``None`` keeps what the row has.
        proposed_scope: ``"global"`` for a pending global (``pipeline/global_cap.py``),
            else ``None``; a re-add records the latest, as its note is rewritten with it.

    Returns:
        The id, ``created`` (``True`` only for a new row) and the proof count after the call.
    """
    now = utcnow()
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None:
        row = Learning(
            id=learning_id,
            title=title[:1000],
            category=category or "Unknown",
            learning_type=learning_type or DEFAULT_LEARNING_TYPE,
            confidence_num=confidence_num,
            status=status or ACTIVE,
            proof_count=1,
            signal_hash=signal_hash,
            session_id=session_id,
            source_path=source,
            note_path=note_path,
            content_hash=content_hash,
            created_by_job=job_id,
            created_at=now,
            updated_at=now,
            scope=scope,
            repo_key=repo_key,
            evidence=evidence,
            evidence_origin=evidence_origin,
            anchors=anchors,
            forget_after=forget_after,
            proposed_scope=proposed_scope,
        )
        try:
            with session.begin_nested():
                session.add(row)
        except IntegrityError:  # a concurrent add of the same id: fall through to update
            # Lock the winner's row: without FOR UPDATE two racing adds would both read
            # proof_count N and both write N+1 (a lost update, seen on PostgreSQL).
            row = session.get(Learning, learning_id, populate_existing=True, with_for_update=True)
            assert row is not None
        else:
            add_source(session, learning_id, source, job_id)
            return UpsertResult(learning_id, True, 1)
    _history(session, row, "readded", "same learning written again", job_id)
    row.note_path = note_path
    row.content_hash = content_hash
    row.updated_at = now
    row.scope, row.repo_key = scope, repo_key
    row.proposed_scope = proposed_scope
    if evidence is not None:
        row.evidence, row.evidence_origin, row.anchors = evidence, evidence_origin, anchors
    if forget_after is not None:
        row.forget_after = forget_after
    target = status or (ACTIVE if is_retired(row.status) else row.status)
    if is_retired(row.status) and not is_retired(target):
        row.retired_reason = None
        row.retired_at = None
        row.superseded_by = None
        row.is_latest = True  # written again: the newest word on its subject once more
    row.status = target
    if add_source(session, learning_id, source, job_id):
        row.proof_count += 1
    return UpsertResult(learning_id, False, row.proof_count)


def add_proof(
    session: Session, learning_id: str, source: str, *, reason: str | None, job_id: str | None
) -> bool:
    """UPDATE action: +1 proof from a new source, with a history snapshot first.

    Args:
        session: An open write session; the row is read ``FOR UPDATE``.
        learning_id: The learning the model says was confirmed.
        source: The confirming source (usually a transcript path).
        reason: Why, stored in the history row.
        job_id: The job that made the change, if any.

    Returns:
        ``True`` when the proof was added; ``False`` when the learning does not exist or
        ``source`` was already recorded for it.
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None:
        return False
    if session.scalars(
        select(LearningSource.id).where(
            LearningSource.learning_id == learning_id,
            LearningSource.source == source_key(source),
        )
    ).first():
        return False
    _history(session, row, "proof_added", reason, job_id)
    add_source(session, learning_id, source, job_id)
    row.proof_count += 1
    row.updated_at = utcnow()
    return True


def retire(
    session: Session,
    learning_id: str,
    *,
    reason: str,
    status: str = "retired",
    superseded_by: str | None = None,
    job_id: str | None = None,
) -> bool:
    """DELETE action: retire non-destructively; a second retire keeps the first reason.

    Args:
        session: An open write session; the row is read ``FOR UPDATE``.
        learning_id: The learning to retire.
        reason: Why, stored on the row and in its history.
        status: The new status (not checked; callers pass ``retired``).
        superseded_by: The id of the learning that replaces it, if any.
        job_id: The job that made the change, if any.

    Returns:
        ``True`` when the row changed; ``False`` when it does not exist or is already in a
        :data:`RETIRED` status.
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None or is_retired(row.status):
        return False
    _history(session, row, "status_change", reason, job_id)
    row.status = status
    row.retired_reason = reason
    row.superseded_by = superseded_by
    row.retired_at = utcnow()
    row.updated_at = row.retired_at
    return True


def archive(session: Session, learning_id: str, *, reason: str) -> Learning | None:
    """A person's ``forget``: the learning leaves circulation as ``archived`` (any status).

    Unlike :func:`retire` this also archives a learning that is already out of circulation
    for another reason (superseded, stale): the person's decision is the one that holds,
    and ``restore`` undoes it. A second ``forget`` changes nothing.

    Args:
        session: An open write session; the row is read ``FOR UPDATE``.
        learning_id: The learning.
        reason: Why (stored on the row and in its history).

    Returns:
        The row, or ``None`` when the ledger has none (a note written by hand).
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None or row.status == ARCHIVED:
        return row
    _history(session, row, "status_change", reason, None)
    row.status = ARCHIVED
    row.retired_reason = reason
    row.retired_at = utcnow()
    row.updated_at = row.retired_at
    return row


def restore(session: Session, learning_id: str, *, reason: str) -> Learning | None:
    """A person's ``restore``: the learning is active and the latest word again.

    Args:
        session: An open write session; the row is read ``FOR UPDATE``.
        learning_id: The learning (any status :func:`reflect_jobs.lifecycle.is_restorable`
            accepts; an active one is left as it is).
        reason: Why (stored in its history).

    Returns:
        The row, or ``None`` when the ledger has none.

    Raises:
        ValueError: The learning is waiting for review (``review accept`` decides that).
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None or (row.status == ACTIVE and row.is_latest):
        return row
    if row.status == PROPOSED:
        raise ValueError(
            f"{learning_id} is waiting for review: `reflect-jobs review accept {learning_id}`"
        )
    _history(session, row, "restored", reason, None)
    row.status = ACTIVE
    row.is_latest = True
    row.superseded_by = None
    row.retired_reason = None
    row.retired_at = None
    row.forget_after = None  # a person brought it back: its TTL does not take it again
    row.updated_at = utcnow()
    return row


def record_chunks(session: Session, hashes: list[str], *, transcript_path: str, job_id: str) -> int:
    """Mark dialogue windows as turned into learnings — only ever called by a committed add.

    Args:
        session: An open write session.
        hashes: The chunk hashes of the slice that was added; duplicates and hashes already
            stored are skipped.
        transcript_path: The transcript the chunks came from.
        job_id: The job that added them.

    Returns:
        How many new hashes were stored.
    """
    if not hashes:
        return 0
    seen = set(session.scalars(select(ChunkHash.hash).where(ChunkHash.hash.in_(hashes))))
    now = utcnow()
    new = [h for h in dict.fromkeys(hashes) if h not in seen]
    for h in new:
        session.add(
            ChunkHash(hash=h, transcript_path=transcript_path, job_id=job_id, created_at=now)
        )
    return len(new)


def prune_chunks(session: Session, ttl_days: int = CHUNK_HASH_TTL_DAYS) -> int:
    """Delete chunk hashes older than the TTL that ``LedgerView.seen_chunk_hashes`` honours.

    Such rows are already ignored by the dedup read, so deleting them changes no decision;
    it bounds the table, and it lets a window learned again after the TTL be recorded
    afresh (:func:`record_chunks` skips a hash that has any row, however old).

    Args:
        session: An open ledger session.
        ttl_days: The retention in days (<= 0 keeps everything).

    Returns:
        How many rows were deleted.
    """
    if ttl_days <= 0:
        return 0
    matched = rows_affected(
        session, delete(ChunkHash).where(ChunkHash.created_at < utcnow() - timedelta(days=ttl_days))
    )
    return matched or 0
