"""The read-only ledger view the ``prepare`` cascade works against.

``prepare`` is CPU-bound (reading and scoring a transcript), so it must not hold a ledger
transaction while it runs: each question the cascade asks (:class:`cascade.LedgerView`)
opens its own short transaction and closes it before the answer is used. The semantic
related-learnings lookup asks the same view for the rows behind its hits, so there is one
place that turns a ``Learning`` row into a ``RelatedCandidate``.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from reflect_jobs.cascade.model import RelatedCandidate

from ..lifecycle import RETIRED_STATUSES
from .db import session_scope
from .learnings import CHUNK_HASH_TTL_DAYS
from .models import ChunkHash, Learning, utcnow


def _candidate(row: Learning) -> RelatedCandidate:
    return RelatedCandidate(
        id=row.id,
        title=row.title,
        category=row.category,
        status=row.status,
        proof_count=row.proof_count,
        created_at=row.created_at.isoformat(),
    )


class LedgerView:
    """``cascade.LedgerView`` over short, separate transactions on the ledger at ``db``.

    Args:
        db: The ledger's SQLAlchemy URL.
    """

    def __init__(self, db: str) -> None:
        self.db = db

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]:
        """Which of ``hashes`` an add already turned into learnings (within the TTL).

        Args:
            hashes: Chunk hashes of the transcript being prepared.

        Returns:
            The subset recorded by a committed add in the last ``CHUNK_HASH_TTL_DAYS`` days.
        """
        if not hashes:
            return set()
        cutoff = utcnow() - timedelta(days=CHUNK_HASH_TTL_DAYS)
        with session_scope(self.db) as s:
            return set(
                s.scalars(
                    select(ChunkHash.hash).where(
                        ChunkHash.hash.in_(list(hashes)), ChunkHash.created_at >= cutoff
                    )
                )
            )

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]:
        """The newest active learnings, for the revision block to offer.

        Args:
            limit: At most this many, newest first.

        Returns:
            One candidate per learning that is not retired.
        """
        with session_scope(self.db) as s:
            rows = s.scalars(
                select(Learning)
                .where(Learning.status.not_in(RETIRED_STATUSES))
                .order_by(Learning.created_at.desc())
                .limit(limit)
            )
            return [_candidate(r) for r in rows]

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]:
        """Active learnings already made from exactly this signal set.

        Args:
            signal_hash: The cascade's hash of the transcript's signals.

        Returns:
            Their ids (empty for an empty hash).
        """
        if not signal_hash:
            return []
        with session_scope(self.db) as s:
            return list(
                s.scalars(
                    select(Learning.id).where(
                        Learning.signal_hash == signal_hash,
                        Learning.status.not_in(RETIRED_STATUSES),
                    )
                )
            )

    def candidates_by_id(self, ids: list[str]) -> dict[str, RelatedCandidate]:
        """The learnings behind semantic-search hits, whatever their status.

        Args:
            ids: Note ids returned by the embedding index.

        Returns:
            A candidate per id the ledger knows, keyed by id.
        """
        with session_scope(self.db) as s:
            return {
                r.id: _candidate(r) for r in s.scalars(select(Learning).where(Learning.id.in_(ids)))
            }
