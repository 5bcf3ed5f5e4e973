"""Note edits an add commits to, applied to the note files after the commit.

An UPDATE (or a semantic twin) adds proof to an existing note and a DELETE retires one: the
ledger changes in the add transaction, the markdown file after it — file I/O never runs
while that transaction holds the ledger's write lock. To close the gap between the two, the
transaction that finishes the job also stores the edits on the job's ``result``::

    {"note_edits": [{"id": …, "op": "bump", "source": …, "at": …},
                    {"id": …, "op": "retire", "reason": …, "at": …}],
     "note_edits_applied": false}

:func:`apply` then rewrites the files and, in a second short transaction, sets
``note_edits_applied``. A process killed in between (failpoint ``after_commit:add``) leaves
the flag false, and the periodic recovery (:func:`heal`) applies the edits again. Applying
twice is harmless: a bump sets the proof count the ledger holds now and adds its source only
once; a retire sets the status and reason, and only while the ledger still has the learning
retired (a later add may have brought it back).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from reflect_jobs import kb
from reflect_jobs.ledger import confirmations, control, proposals, review
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, Learning, RetireProposal
from reflect_jobs.lifecycle import ACTIVE, REJECTED, SUPERSEDED, is_retired
from reflect_jobs.recall.fading import iso
from reflect_jobs.writer.outcomes import retries_exhausted

from . import global_cap
from .runtime import Runtime, log

NoteEdit = dict[str, Any]
HEAL_BATCH = 100


def bump(learning_id: str, source: str, at: str, phrases: list[str] | None = None) -> NoteEdit:
    """A proof-added edit: the note gains ``source`` and the ledger's proof count.

    Args:
        learning_id: The note's id.
        source: The transcript that confirmed it.
        at: The add's timestamp (``updated`` in the frontmatter).
        phrases: The confirming session's ``applies_when`` (``kb.bump_note`` adds the new).

    Returns:
        The edit, as stored on the job.
    """
    edit: NoteEdit = {"id": learning_id, "op": "bump", "source": source, "at": at}
    if phrases:
        edit["applies_when"] = list(phrases)
    return edit


def retire(learning_id: str, reason: str, at: str) -> NoteEdit:
    """A retirement edit: the note's status becomes ``retired`` with ``reason``.

    Args:
        learning_id: The note's id.
        reason: Why (from the DELETE action).
        at: The add's timestamp (``updated`` in the frontmatter).

    Returns:
        The edit, as stored on the job.
    """
    return {"id": learning_id, "op": "retire", "reason": reason, "at": at}


def supersede(learning_id: str, by: str, at: str) -> NoteEdit:
    """A contradiction demotion's edit: the note becomes ``superseded`` by ``by``.

    Args:
        learning_id: The older note's id.
        by: The id of the learning whose title negates it.
        at: The add's timestamp (``updated`` in the frontmatter).

    Returns:
        The edit, as stored on the job (a retire edit with its status and successor).
    """
    return {
        "id": learning_id,
        "op": "retire",
        "status": SUPERSEDED,
        "superseded_by": by,
        "reason": f"contradicted by {by} (its title negates this one's)",
        "at": at,
    }


def accept(learning_id: str, at: str) -> NoteEdit:
    """An acceptance edit: a ``proposed`` note becomes ``active`` (ARCHITECTURE §7.1).

    Args:
        learning_id: The note's id.
        at: The add's timestamp (``updated`` in the frontmatter).

    Returns:
        The edit, as stored on the job.
    """
    return {"id": learning_id, "op": "accept", "at": at}


def promote(learning_id: str, at: str) -> NoteEdit:
    """A promotion edit: a pending global note becomes global (``pipeline/global_cap.py``).

    Args:
        learning_id: The note's id.
        at: The add's timestamp (``updated`` in the frontmatter).

    Returns:
        The edit, as stored on the job.
    """
    return {"id": learning_id, "op": "promote", "at": at}


def confirm(learning_id: str, at: str) -> NoteEdit:
    """A confirmation edit: the note takes the ledger's ``confirmations`` and
    ``last_confirmed`` (``ledger/confirmations.py``; what the context store's dormancy
    clock reads).

    Args:
        learning_id: The note's id.
        at: When the edit was made owed (the figures come from the ledger).

    Returns:
        The edit, as stored on the job.
    """
    return {"id": learning_id, "op": "confirm", "at": at}


def record(job: Job, edits: list[NoteEdit]) -> None:
    """Store ``edits`` on the job, pending, in the caller's (finishing) transaction.

    Args:
        job: The add job being finished.
        edits: The edits its commit makes owed; nothing is stored when empty.
    """
    if edits:
        job.result = {**(job.result or {}), "note_edits": edits, "note_edits_applied": False}


@dataclass(frozen=True)
class _Row:
    note_path: str | None
    proof_count: int
    status: str
    scope: str = "global"
    confirmations: int = 0
    last_confirmed: str | None = None
    pending: bool = False  # a pending global (global_cap.is_pending)


def _rows(db: str, ids: list[str]) -> dict[str, _Row]:
    with session_scope(db, readonly=True) as s:
        return {
            r.id: _Row(
                r.note_path,
                r.proof_count,
                r.status,
                r.scope,
                int(r.confirmations or 0),
                iso(r.last_confirmed_at) if r.last_confirmed_at else None,
                global_cap.is_pending(r),
            )
            for r in s.scalars(select(Learning).where(Learning.id.in_(ids)))
        }


def _apply_one(edit: NoteEdit, row: _Row | None) -> None:
    if row is None or not row.note_path or not os.path.exists(row.note_path):
        return
    if edit["op"] == "bump":
        kb.bump_note(
            Path(row.note_path),
            source=str(edit["source"]),
            proof_count=row.proof_count,
            now=str(edit["at"]),
            phrases=edit.get("applies_when"),
        )
    elif edit["op"] == "retire" and is_retired(row.status):
        kb.retire_note(
            Path(row.note_path),
            status=str(edit.get("status") or "retired"),
            reason=str(edit["reason"]),
            superseded_by=edit.get("superseded_by"),
            now=str(edit["at"]),
        )
    elif edit["op"] == "accept" and row.status == ACTIVE:
        kb.accept_note(Path(row.note_path), now=str(edit["at"]))
    elif edit["op"] == "promote" and row.scope == "global":
        kb.promote_note(Path(row.note_path), now=str(edit["at"]))
    elif edit["op"] == "confirm" and row.last_confirmed:
        kb.confirm_note(
            Path(row.note_path),
            confirmations=row.confirmations,
            last_confirmed=row.last_confirmed,
        )


def apply_direct(db: str, edits: list[NoteEdit]) -> list[str]:
    """Rewrite the notes ``edits`` name after a person's commit (no job holds them).

    The same rule as :func:`apply`: each edit follows the ledger as it is now, so running it
    again is harmless.

    Args:
        db: The ledger URL.
        edits: The edits the person's commit made owed.

    Returns:
        One line per edit that failed (the command says so; running it again retries).
    """
    rows = _rows(db, sorted({str(e.get("id", "")) for e in edits}))
    failed: list[str] = []
    for edit in edits:
        try:
            _apply_one(edit, rows.get(str(edit.get("id", ""))))
        except (OSError, kb.NoteError) as exc:
            failed.append(f"{edit.get('op')} {edit.get('id')}: {type(exc).__name__}: {exc}")
    return failed


def apply(rt: Runtime, job_id: str, edits: list[NoteEdit]) -> bool:
    """Rewrite the notes ``edits`` name, then mark them applied on the job.

    A note that cannot be rewritten (disk full, unparseable) is reported to the error
    ledger and left pending for the next recovery pass; after ``max_retries`` passes the
    edits are given up (marked applied, reported as an error) so one broken file does not
    come back every minute forever.

    Args:
        rt: The runtime.
        job_id: The finished add job holding the edits.
        edits: Its ``result["note_edits"]``.

    Returns:
        True when the edits are settled (applied, or given up), False when still pending.
    """
    rows = _rows(rt.db, sorted({str(e.get("id", "")) for e in edits}))
    failed: list[str] = []
    for edit in edits:
        try:
            _apply_one(edit, rows.get(str(edit.get("id", ""))))
        except (OSError, kb.NoteError) as exc:
            failed.append(f"{edit.get('op')} {edit.get('id')}: {type(exc).__name__}: {exc}")
    with session_scope(rt.db) as session:
        job = session.get(Job, job_id)
        if job is None or not job.result or job.result.get("note_edits_applied") is not False:
            return True  # settled by another pass meanwhile
        result = dict(job.result)
        if failed:
            prior = int(result.get("note_edit_failures", 0))
            result["note_edit_failures"] = prior + 1
            give_up = retries_exhausted(prior, rt.settings.max_retries)
            message = "; ".join(failed)[:500]
            log.warning("note edits failed", job_id=job_id, detail=message, given_up=give_up)
            control.record_error(
                session,
                kind="note_edit_failed",
                severity="error" if give_up else "warn",
                message=message,
                context={"job_id": job_id},
            )
            if not give_up:
                job.result = result
                return False
        result["note_edits_applied"] = True
        job.result = result
    return True


def heal(rt: Runtime) -> int:
    """Apply the pending note edits of finished jobs (a worker died after its commit), and
    the note rewrites owed by applied retire proposals.

    Called by the periodic recovery. Asks for a reindex (unless ``skip_reindex``) when any
    job's edits were settled, since their notes may have changed.

    Args:
        rt: The runtime.

    Returns:
        How many jobs' edits were settled.
    """
    with session_scope(rt.db, readonly=True) as session:
        pending = [
            (job.id, list((job.result or {}).get("note_edits") or []))
            for job in session.scalars(
                select(Job)
                .where(
                    Job.state == "done", Job.result["note_edits_applied"].as_boolean().is_(False)
                )
                .limit(HEAL_BATCH)
            )
        ]
    healed = sum(apply(rt, job_id, edits) for job_id, edits in pending)
    with session_scope(rt.db, readonly=True) as session:
        owed = proposals.unsynced(session, HEAL_BATCH)
    healed += sum(sync_proposal(rt.db, pid) for pid in owed)
    if healed:
        log.info("note edits healed", jobs=healed)
        if not rt.settings.skip_reindex:
            rt.dispatcher.kb_changed()
    return healed


def sync_proposal(db: str, proposal_id: int) -> bool:
    """Rewrite the note of an applied retire proposal, then mark it synced.

    Idempotent like the job edits: the note is only marked retired while the ledger still
    has the learning retired.

    Args:
        db: The ledger URL.
        proposal_id: An ``applied`` proposal.

    Returns:
        True when the note is settled (rewritten, or nothing to rewrite); False when the
        rewrite failed (reported to the error ledger, retried by the next recovery).
    """
    with session_scope(db, readonly=True) as session:
        p = session.get(RetireProposal, proposal_id)
        if p is None or p.note_synced:
            return True
        lid, decided = p.learning_id, p.decided_at or p.created_at
        learning = session.get(Learning, lid)
        reason = (learning.retired_reason if learning else None) or f"retire proposal {p.id}"
    edit = retire(lid, reason, f"{decided:%Y-%m-%dT%H:%M:%SZ}")
    try:
        _apply_one(edit, _rows(db, [lid]).get(lid))
    except (OSError, kb.NoteError) as exc:
        with session_scope(db) as session:
            control.record_error(
                session,
                kind="note_edit_failed",
                severity="warn",
                message=f"retire proposal {proposal_id} {lid}: {type(exc).__name__}: {exc}"[:500],
            )
        return False
    with session_scope(db) as session:
        p = session.get(RetireProposal, proposal_id)
        if p is not None:
            p.note_synced = True
    return True


def apply_proposal(db: str, proposal_id: int, *, by: str) -> dict[str, Any]:
    """A person applies a retire proposal: ledger first (one short commit), then the note.

    The same rule as the add stage: no ledger transaction is held across the note's
    rewrite; a process killed in between leaves ``note_synced`` false and the periodic
    recovery (:func:`heal`) rewrites the note.

    Args:
        db: The ledger URL.
        proposal_id: The pending proposal.
        by: Who applies it.

    Returns:
        The proposal as :func:`reflect_jobs.ledger.proposals.to_dict` shows it, plus
        ``note_synced``.

    Raises:
        ProposalError: No such proposal, not pending, or its learning is gone/retired.
    """
    with session_scope(db) as session:
        shown = proposals.to_dict(proposals.apply_proposal(session, proposal_id, by=by))
    shown["note_synced"] = sync_proposal(db, proposal_id)
    return shown


def reject_proposal(db: str, proposal_id: int, *, by: str) -> dict[str, Any]:
    """A person rejects a retire proposal: the learning and its note stay as they are.

    Args:
        db: The ledger URL.
        proposal_id: The pending proposal.
        by: Who rejects it.

    Returns:
        The proposal as :func:`reflect_jobs.ledger.proposals.to_dict` shows it.

    Raises:
        ProposalError: No such proposal, or it is not pending.
    """
    with session_scope(db) as session:
        return proposals.to_dict(proposals.reject_proposal(session, proposal_id, by=by))


def review_decide(db: str, learning_id: str, verb: str, *, by: str) -> dict[str, Any]:
    """A person accepts or rejects a learning waiting for review: ledger, then the note.

    The add's rule again: the ledger commits first (one short transaction), the note is
    rewritten after it. A re-run of the same decision is a no-op in the ledger that
    finishes a rewrite a crash left owed.

    Args:
        db: The ledger URL.
        learning_id: The learning's id (from ``reflect-jobs review``).
        verb: ``accept`` or ``reject``.
        by: Who decided.

    Returns:
        ``{"id", "status", "title", "note_synced"}``; ``note_synced`` is False when the
        note could not be rewritten (reported to the error ledger; run the command again).

    Raises:
        ReviewError: No such learning, or it is not waiting for review.
    """
    now = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
    before = _rows(db, [learning_id]).get(learning_id)
    # A pending global learning (told only in its repository) goes global when a person
    # accepts it (pipeline/global_cap.py; the ledger's ``proposed_scope``, migration 0012).
    pending = before is not None and before.pending
    with session_scope(db) as session:
        row = review.decide(session, learning_id, verb, by=by, pending=pending)
        if verb == "accept" and pending:
            global_cap.promote_row(
                session, row, reason=f"made global in review by {by}", job_id=None
            )
        if verb == "accept":  # a person vouched for it: a confirmation (it wakes if dormant)
            confirmations.record_confirmation(
                session, learning_id, by=confirmations.BY_PERSON, session_id=None
            )
        shown: dict[str, Any] = {
            "id": row.id,
            "status": row.status,
            "title": row.title,
            "scope": row.scope,
        }
    if verb == "accept":
        edits = [accept(learning_id, now), promote(learning_id, now), confirm(learning_id, now)]
    else:
        edit = retire(learning_id, f"rejected in review by {by}", now)
        edit["status"] = REJECTED
        edits = [edit]
    try:
        for edit in edits:
            _apply_one(edit, _rows(db, [learning_id]).get(learning_id))
        shown["note_synced"] = True
    except (OSError, kb.NoteError) as exc:
        with session_scope(db) as session:
            control.record_error(
                session,
                kind="note_edit_failed",
                severity="warn",
                message=f"review {verb} {learning_id}: {type(exc).__name__}: {exc}"[:500],
            )
        shown["note_synced"] = False
    return shown
