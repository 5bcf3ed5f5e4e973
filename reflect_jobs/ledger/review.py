"""The review queue: learnings no model vouched for wait as ``proposed`` (ARCHITECTURE §7.1).

Three kinds of learning are stored but not told to a session: the heuristic writer's (no
model read the session), one whose confidence is below ``REFLECT_REVIEW_BELOW``, and one
whose only evidence is text the session *read* (``evidence_origin`` ``tool``: a README, a
web page, a tool's output — untrusted input; a hostile page quoted in one session must not
become an instruction in every later one). A person accepts or rejects them (``reflect-jobs
review``); a later session that confirms the same learning with its own evidence accepts it.

The decisions are pure functions (:func:`review_reasons`, :func:`next_status`); the rest
reads and changes ledger rows. The note follows the ledger (``pipeline/note_edits.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..lifecycle import ACTIVE, PROPOSED, REJECTED
from .learnings import _history
from .models import Job, Learning, utcnow

HEURISTIC = "heuristic"


class ReviewError(LookupError):
    """No learning has this id, or it is not waiting for review (one line for the CLI)."""


def review_reasons(learning: Mapping[str, Any], *, writer: str, review_below: float) -> list[str]:
    """Why a new learning must wait for review; empty when a model vouched for it.

    Args:
        learning: The learning as planned (``confidence_num``, ``evidence_origin``).
        writer: The backend that answered (the plan's ``writer``).
        review_below: ``REFLECT_REVIEW_BELOW``.

    Returns:
        Zero or more short reasons: the heuristic writer, a confidence under the bar, or
        evidence that is only text the session read.
    """
    reasons: list[str] = []
    if writer == HEURISTIC:
        reasons.append("heuristic writer (no model)")
    try:
        confidence = float(learning.get("confidence_num", 0.6))
    except (TypeError, ValueError):
        confidence = 0.6
    if confidence < review_below:
        reasons.append(f"confidence {confidence:.2f} < {review_below:g}")
    if learning.get("evidence_origin") == "tool":
        reasons.append("evidence is text the session read")
    return reasons


def next_status(existing: str | None, *, trusted: bool, confirmed: bool) -> str:
    """The status a learning gets when a CREATE writes it (again).

    Args:
        existing: The ledger row's status, ``None`` for a new learning.
        trusted: The CREATE has no :func:`review_reasons`.
        confirmed: It comes from another session than the one that first wrote it.

    Returns:
        ``active`` for a new trusted learning, else ``proposed``; an active learning stays
        active (a weaker re-add never demotes it); a proposed one becomes active only when
        a trusted CREATE from another session confirms it; one a person rejected stays
        rejected; any other retired learning comes back as a new one would.
    """
    if existing is None:
        return ACTIVE if trusted else PROPOSED
    status = existing.strip().lower()
    if status == ACTIVE:
        return ACTIVE
    if status == PROPOSED:
        return ACTIVE if trusted and confirmed else PROPOSED
    if status == REJECTED:
        return REJECTED
    return ACTIVE if trusted else PROPOSED


def confirms(
    row: Learning | None, *, session_id: str | None, trusted: bool, origin: object
) -> bool:
    """Whether a proof (an UPDATE, a semantic twin) accepts a proposed learning.

    Args:
        row: The learning the proof is for.
        session_id: The confirming job's session.
        trusted: The confirming writer is a model (not the heuristic one).
        origin: The proof's checked ``evidence_origin`` (``None`` without evidence).

    Returns:
        True when the row is ``proposed``, the proof carries evidence of the person's or
        the assistant's words found in its own slice, and it comes from another session.
    """
    return (
        row is not None
        and row.status == PROPOSED
        and trusted
        and origin in ("person", "assistant")
        and bool(session_id)
        and row.session_id != session_id
    )


def accept_row(session: Session, row: Learning, *, reason: str, job_id: str | None) -> None:
    """Make a proposed learning active, with a history snapshot first.

    Args:
        session: An open write session.
        row: The learning (locked by the caller's read).
        reason: Why (stored in its history).
        job_id: The job that confirmed it, if any.
    """
    _history(session, row, "accepted", reason, job_id)
    row.status = ACTIVE
    row.updated_at = utcnow()


def statuses(session: Session, ids: list[str]) -> dict[str, tuple[str, str | None]]:
    """``id -> (status, session_id)`` of the learnings that exist among ``ids``.

    Args:
        session: An open ledger session.
        ids: Learning ids.

    Returns:
        The mapping (ids with no row are left out).
    """
    if not ids:
        return {}
    rows = session.execute(
        select(Learning.id, Learning.status, Learning.session_id).where(Learning.id.in_(ids))
    )
    return {r[0]: (r[1], r[2]) for r in rows}


def _why(row: Learning, writer: str, review_below: float) -> list[str]:
    return review_reasons(
        {"confidence_num": row.confidence_num, "evidence_origin": row.evidence_origin},
        writer=writer,
        review_below=review_below,
    )


def to_dict(row: Learning, *, writer: str = "", review_below: float = 0.5) -> dict[str, Any]:
    """A learning as ``review --json`` shows it.

    Args:
        row: The learning.
        writer: The backend of the job that created it (``""`` when unknown).
        review_below: ``REFLECT_REVIEW_BELOW``, to say why it waits.

    Returns:
        ``id``, ``status``, ``title``, ``confidence``, ``evidence``, ``evidence_origin``,
        ``anchors``, ``why`` (list), ``session_id``, ``repo_key`` (``None`` for a global
        learning), ``created_at``, ``note_path``.
    """
    return {
        "id": row.id,
        "status": row.status,
        "title": row.title,
        "confidence": row.confidence_num,
        "evidence": row.evidence,
        "evidence_origin": row.evidence_origin,
        "anchors": list(row.anchors or []),
        "why": _why(row, writer, review_below),
        "session_id": row.session_id,
        "repo_key": row.repo_key,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "note_path": row.note_path,
    }


def list_proposed(
    session: Session, *, review_below: float, limit: int = 500
) -> list[dict[str, Any]]:
    """Every learning waiting for review, oldest first.

    Args:
        session: An open ledger session.
        review_below: ``REFLECT_REVIEW_BELOW`` (to say why each waits).
        limit: At most this many.

    Returns:
        One :func:`to_dict` per ``proposed`` learning.
    """
    rows = list(
        session.scalars(
            select(Learning)
            .where(Learning.status == PROPOSED)
            .order_by(Learning.created_at, Learning.id)
            .limit(limit)
        )
    )
    jobs = {r.created_by_job for r in rows if r.created_by_job}
    writers: dict[str, str] = {}
    if jobs:
        for job_id, actions in session.execute(select(Job.id, Job.actions).where(Job.id.in_(jobs))):
            if isinstance(actions, dict):
                writers[job_id] = str(actions.get("writer") or "")
    return [
        to_dict(r, writer=writers.get(r.created_by_job or "", ""), review_below=review_below)
        for r in rows
    ]


def pending_count(session: Session) -> int:
    """How many learnings wait for review.

    Args:
        session: An open ledger session.

    Returns:
        The count of ``proposed`` learnings.
    """
    return int(
        session.scalar(
            select(func.count()).select_from(Learning).where(Learning.status == PROPOSED)
        )
        or 0
    )


def decide(
    session: Session, learning_id: str, verb: str, *, by: str, pending: bool = False
) -> Learning:
    """A person's ``accept`` or ``reject`` of one learning (the note follows the commit).

    Accepting an already active learning, or rejecting an already rejected one, is a
    no-op that still returns the row (so a command re-run after a crash can finish the
    note's rewrite). The caller makes an accepted pending global learning global
    (``pipeline/global_cap.py``).

    Args:
        session: An open write session.
        learning_id: The learning.
        verb: ``accept`` or ``reject``.
        by: Who decided (stored in the history).
        pending: The learning is a pending global (told only in its repository until
            confirmed): an active one may be rejected too.

    Returns:
        The learning row after the change.

    Raises:
        ReviewError: No such learning, or it is neither proposed nor already decided
            the same way.
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None:
        raise ReviewError(f"no learning {learning_id}")
    if verb == "accept":
        if row.status == ACTIVE:
            return row
        if row.status != PROPOSED:
            raise ReviewError(f"{learning_id} is {row.status}, not waiting for review")
        accept_row(session, row, reason=f"accepted in review by {by}", job_id=None)
        return row
    if row.status == REJECTED:
        return row
    if row.status != PROPOSED and not (pending and row.status == ACTIVE):
        raise ReviewError(f"{learning_id} is {row.status}, not waiting for review")
    reason = f"rejected in review by {by}"
    _history(session, row, "status_change", reason, None)
    row.status = REJECTED
    row.retired_reason = reason
    row.retired_at = utcnow()
    row.updated_at = row.retired_at
    return row


__all__ = [
    "HEURISTIC",
    "ReviewError",
    "accept_row",
    "confirms",
    "decide",
    "list_proposed",
    "next_status",
    "pending_count",
    "review_reasons",
    "statuses",
    "to_dict",
]
