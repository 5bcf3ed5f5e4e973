"""The daily retire cap and the retirements it holds back (ARCHITECTURE §7).

One session re-captured as it grows could retire every listed learning (24 of 24 in five
turns). So the add stage may apply at most ``REFLECT_MAX_RETIRE_PER_DAY`` automatic
retirements per UTC day, across every job and consumer; every further DELETE becomes a
*pending proposal* that ``status`` counts and a person applies or rejects
(``reflect-jobs proposals``). Retirements a person applies do not count against the cap.

The count is read under a lock on one control row (``FOR UPDATE`` on PostgreSQL; the
``BEGIN IMMEDIATE`` write lock on SQLite), so two adds committing at once cannot both take
the last unit. These are plain ledger functions: no file I/O happens here; the note
rewrites follow the commit (``pipeline/note_edits.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..lifecycle import is_retired
from . import learnings
from .models import Control, Learning, LearningHistory, RetireProposal, utcnow

RETIRE_LOCK_KEY = "retire-budget"
PENDING, APPLIED, REJECTED = "pending", "applied", "rejected"


class ProposalError(LookupError):
    """A proposal does not exist or cannot be applied/rejected; the message says why."""


def _day_start(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def retired_today(session: Session, now: datetime | None = None) -> int:
    """Automatic retirements (made by a job) since the UTC midnight before ``now``.

    Args:
        session: An open ledger session.
        now: An aware UTC datetime; ``None`` means now.

    Returns:
        How many ``status_change`` history rows with a job id were written today.
    """
    now = now or utcnow()
    return (
        session.scalar(
            select(func.count())
            .select_from(LearningHistory)
            .where(
                LearningHistory.change_type == "status_change",
                LearningHistory.job_id.is_not(None),
                LearningHistory.at >= _day_start(now),
            )
        )
        or 0
    )


def remaining_retirements(session: Session, cap: int, now: datetime | None = None) -> int:
    """Lock the retire budget and say how many automatic retirements today still allows.

    Call it once per add transaction, before the retirements; the lock holds until that
    transaction ends, so concurrent adds take the budget one after the other.

    Args:
        session: An open write session (the add's transaction).
        cap: ``REFLECT_MAX_RETIRE_PER_DAY``.
        now: An aware UTC datetime; ``None`` means now.

    Returns:
        ``cap`` minus today's automatic retirements, never below 0.
    """
    row = session.get(Control, RETIRE_LOCK_KEY, with_for_update=True)
    if row is None:
        try:
            with session.begin_nested():
                session.add(Control(key=RETIRE_LOCK_KEY, value="lock", updated_at=utcnow()))
        except IntegrityError:  # a concurrent first add made it: lock theirs
            pass
        session.get(Control, RETIRE_LOCK_KEY, with_for_update=True, populate_existing=True)
    return max(0, cap - retired_today(session, now))


def propose(
    session: Session, learning_id: str, *, reason: str, job_id: str | None, source: str | None
) -> bool:
    """Hold a retirement back as a pending proposal.

    Args:
        session: An open write session.
        learning_id: The learning the DELETE targets.
        reason: The DELETE's reason.
        job_id: The add job that proposed it.
        source: The transcript behind it.

    Returns:
        True when a proposal was recorded; False when the learning does not exist, is
        already retired, or already has a pending proposal (a growing session proposes the
        same retirement again and again: one row is enough).
    """
    row = session.get(Learning, learning_id)
    if row is None or is_retired(row.status):
        return False
    exists = session.scalars(
        select(RetireProposal.id).where(
            RetireProposal.learning_id == learning_id, RetireProposal.status == PENDING
        )
    ).first()
    if exists is not None:
        return False
    session.add(
        RetireProposal(
            learning_id=learning_id,
            reason=reason,
            job_id=job_id,
            source=source,
            status=PENDING,
            note_synced=True,
            created_at=utcnow(),
        )
    )
    return True


def pending_count(session: Session) -> int:
    """How many proposals wait for a person (``status``).

    Args:
        session: An open ledger session.

    Returns:
        The number of ``pending`` proposals.
    """
    return (
        session.scalar(
            select(func.count()).select_from(RetireProposal).where(RetireProposal.status == PENDING)
        )
        or 0
    )


def to_dict(p: RetireProposal, title: str | None = None) -> dict[str, Any]:
    """A proposal as the JSON ``reflect-jobs proposals --json`` prints.

    Args:
        p: The proposal.
        title: The learning's title, when known.

    Returns:
        ``{"id", "learning_id", "title", "reason", "job_id", "source", "status",
        "created_at", "decided_at", "decided_by"}`` (times as ISO 8601).
    """
    return {
        "id": p.id,
        "learning_id": p.learning_id,
        "title": title,
        "reason": p.reason,
        "job_id": p.job_id,
        "source": p.source,
        "status": p.status,
        "created_at": p.created_at.isoformat() if p.created_at else None,
        "decided_at": p.decided_at.isoformat() if p.decided_at else None,
        "decided_by": p.decided_by,
    }


def list_proposals(session: Session, *, status: str | None = PENDING) -> list[dict[str, Any]]:
    """Proposals, oldest first, with the title of the learning each would retire.

    Args:
        session: An open ledger session.
        status: Only this status (``pending``, ``applied``, ``rejected``); None for all.

    Returns:
        :func:`to_dict` of each.
    """
    query = (
        select(RetireProposal, Learning.title)
        .outerjoin(Learning, Learning.id == RetireProposal.learning_id)
        .order_by(RetireProposal.id)
    )
    if status is not None:
        query = query.where(RetireProposal.status == status)
    return [to_dict(p, title) for p, title in session.execute(query).all()]


def _pending(session: Session, proposal_id: int) -> RetireProposal:
    p = session.get(RetireProposal, proposal_id, with_for_update=True)
    if p is None:
        raise ProposalError(f"no retire proposal {proposal_id}")
    if p.status != PENDING:
        raise ProposalError(f"retire proposal {proposal_id} is already {p.status}")
    return p


def apply_proposal(session: Session, proposal_id: int, *, by: str) -> RetireProposal:
    """A person applies a proposal: the learning is retired in the ledger now.

    The note's rewrite follows the commit (``note_synced`` stays False until it is done;
    see ``pipeline.note_edits.apply_proposal``). Not counted against the daily cap.

    Args:
        session: An open write session.
        proposal_id: The proposal.
        by: Who decided (recorded on the row).

    Returns:
        The proposal, now ``applied``.

    Raises:
        ProposalError: No such proposal, it is not pending, or its learning no longer
            exists or is already retired (reject it instead).
    """
    p = _pending(session, proposal_id)
    reason = f"{p.reason} (retire proposal {p.id} applied by {by})"
    if not learnings.retire(session, p.learning_id, reason=reason, job_id=None):
        raise ProposalError(
            f"retire proposal {proposal_id}: learning {p.learning_id} is gone or already "
            "retired; reject the proposal instead"
        )
    p.status, p.decided_at, p.decided_by, p.note_synced = APPLIED, utcnow(), by, False
    return p


def reject_proposal(session: Session, proposal_id: int, *, by: str) -> RetireProposal:
    """A person rejects a proposal: the learning stays active.

    Args:
        session: An open write session.
        proposal_id: The proposal.
        by: Who decided.

    Returns:
        The proposal, now ``rejected``.

    Raises:
        ProposalError: No such proposal, or it is not pending.
    """
    p = _pending(session, proposal_id)
    p.status, p.decided_at, p.decided_by = REJECTED, utcnow(), by
    return p


def unsynced(session: Session, limit: int = 100) -> list[int]:
    """Applied proposals whose note rewrite is still owed (a process died after the commit).

    Args:
        session: An open ledger session.
        limit: At most this many.

    Returns:
        Their ids, oldest first.
    """
    return list(
        session.scalars(
            select(RetireProposal.id)
            .where(RetireProposal.status == APPLIED, RetireProposal.note_synced.is_(False))
            .order_by(RetireProposal.id)
            .limit(limit)
        )
    )
