"""The add stage: turn the write stage's action plan into notes and ledger provenance.

1. New notes (CREATEs that are not semantic twins of an existing note) are written and
   verified on disk first, outside any transaction; a failure there retries the add with
   backoff and never commits half a plan.
2. One transaction (under our lease) upserts their learnings, adds proof (UPDATEs and
   twins), retires (DELETEs, at most ``REFLECT_MAX_RETIRE_PER_DAY`` per UTC day in all;
   the rest become pending proposals for a person), records the chunk hashes, advances the
   session's watermark (``ledger/watermarks.py``) and finishes the job — together with
   the note edits this makes owed (``note_edits``).
3. After the commit the edited notes are rewritten (:mod:`.note_edits`); a crash before
   that is healed by the periodic recovery. Then one coalesced reindex is requested.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from reflect_jobs import kb
from reflect_jobs.faults import failpoint
from reflect_jobs.index import semantic
from reflect_jobs.kb import anchors
from reflect_jobs.ledger import (
    confirmations,
    contradiction,
    control,
    learnings,
    proposals,
    review,
    watermarks,
)
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.gateway import JobRow
from reflect_jobs.ledger.jobs import transition
from reflect_jobs.ledger.models import Learning, utcnow
from reflect_jobs.lifecycle import ARCHIVED, PROPOSED
from reflect_jobs.recall.scope import transcript_repo
from reflect_jobs.reflections import reflector
from reflect_jobs.repo import RepoError
from reflect_jobs.writer.outcomes import retries_exhausted

from . import global_cap, note_edits
from .learning_rows import contradictions, record_learning
from .middleware import Stage, StageRun, no_preview, run_stage
from .runtime import Runtime, backoff, finish, log, log_transition, owned


@dataclass
class AddTicket:
    """What the add stage took from the job when it claimed it."""

    plan: dict[str, Any]
    source: str
    session_id: str | None
    signal_hash: str | None
    chunk_hashes: list[str]
    stats: dict[str, Any]
    harness: str
    planned: Any


def run_add(rt: Runtime, job_id: str) -> None:
    """Write notes and sidecars, verify them, commit provenance, then edit existing notes.

    Through the stage chain (``middleware.run_stage``): stage errors, the kill switch
    (``REFLECT_DISABLED``: the job keeps its place), a dry run (nothing is written), the
    claim, then :func:`_add`.

    Args:
        rt: The runtime.
        job_id: The job to add (a no-op unless it is due at stage ``add``).
    """
    run_stage(ADD, rt, job_id)


def _claim(run: StageRun, conn: Connection, job: JobRow) -> AddTicket:
    """Inside the claim's transaction: the plan and what the commit needs."""
    stats = dict(job.prepare_stats or {})
    return AddTicket(
        plan=dict(job.actions or {}),
        source=job.transcript_path,
        session_id=job.session_id,
        signal_hash=job.signal_hash,
        chunk_hashes=list(job.chunk_hashes or []),
        stats=stats,
        harness=job.harness,
        planned=stats.get("watermark"),
    )


def _note_extra(learning: dict[str, Any]) -> dict[str, object] | None:
    """A CREATE's extra frontmatter: ``proposed_scope`` for a pending global
    (``global_cap.note_extra``) and its own ``forget_after`` (seed 003; an absolute ISO time
    ``writer/actions.py`` checked), which the ledger row records too for the hourly sweep."""
    extra = dict(global_cap.note_extra(learning) or {})
    if learning.get("forget_after"):
        extra["forget_after"] = str(learning["forget_after"])
    return extra or None


def _add(run: StageRun) -> None:
    """Notes on disk first, then one commit under our lease, then the note edits."""
    rt, job_id, worker, ticket = run.rt, run.job_id, run.worker, run.ticket
    s = rt.settings
    plan, source, session_id = ticket.plan, ticket.source, ticket.session_id
    signal_hash, chunk_hashes, stats = ticket.signal_hash, ticket.chunk_hashes, ticket.stats
    harness, planned = ticket.harness, ticket.planned
    # The repository the learnings are scoped to: recorded by prepare (a job prepared by an
    # older version has no "repo" key, so the transcript is asked again).
    repo = stats["repo"] if "repo" in stats else transcript_repo(source)
    repo_key = repo.get("key") if isinstance(repo, dict) else None
    repo_root = repo.get("root") if isinstance(repo, dict) else None
    writer = str(plan.get("writer") or "")

    now_iso = utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
    written: list[Any] = []
    twins: list[tuple[dict[str, Any], str, float]] = []
    creates = []
    # The code each learning names, found for $0 (ARCHITECTURE §7, kb/anchors.py): every
    # learning of the answer at once — one git ls-files and one git grep at most — under
    # one deadline, so a huge repository bounds the stage, not just a learning.
    planned_creates = list(plan.get("creates", []))
    found = anchors.find_anchors_many(
        planned_creates, repo_root, deadline=time.monotonic() + ANCHOR_BUDGET_SEC
    )
    for learning, anchored in zip(planned_creates, found, strict=True):
        learning = {**learning, "repo": repo_key} if repo_key else dict(learning)
        learning["harness"] = harness
        learning["anchors"] = anchored
        learning["review"] = review.review_reasons(
            learning, writer=writer, review_below=s.review_below
        )
        twin = semantic.find_twin(
            s.kb_path,
            learning,
            s.dedup_threshold,
            vectors=s.index_vectors,
            embed_model=s.embed_model,
        )
        own_id = _own_id(learning)
        if twin is not None and twin[0] != own_id:
            twins.append((learning, twin[0], twin[1]))  # a near-duplicate: proof, not a note
        else:
            creates.append(learning)
    # The review queue (ARCHITECTURE §7.1): what no model vouched for is written proposed.
    create_ids = [_own_id(x) for x in creates]
    proof_ids = [t[1] for t in twins] + [
        str(u.get("target_id", "")) for u in plan.get("updates", [])
    ]
    with session_scope(rt.db, readonly=True) as session:
        known = review.statuses(session, create_ids)
        rows = global_cap.known_rows(session, create_ids + proof_ids)
        already = global_cap.globals_created(session, session_id)
    # No single source takes over (issue 24): a new global learning is told only in its
    # repository until another session or a person confirms it, at most a few per session
    # (pipeline/global_cap.py).
    scoped = global_cap.scope_creates(
        creates,
        known=rows,
        ids=create_ids,
        session_id=session_id,
        already=already,
        cap=s.max_new_global_per_session,
    )
    kept_forgotten = 0
    try:
        for learning in creates:
            before = known.get(_own_id(learning))
            if before is not None and before[0] == ARCHIVED:
                kept_forgotten += 1  # a person forgot it (`reflect-jobs forget`): it stays so
                continue
            status = review.next_status(
                before[0] if before else None,
                trusted=not learning["review"],
                confirmed=before is not None and before[1] != session_id,
            )
            learning["status"] = status
            if before is not None:
                # A model's forget_after is for a learning it creates: one written again keeps
                # its note's own (a person's TTL is not moved, an old learning not put on a clock).
                learning.pop("forget_after", None)
            written.append(
                (
                    learning,
                    kb.write_learning(
                        s.kb_path,
                        learning,
                        created=now_iso,
                        updated=now_iso,
                        source_path=source,
                        session_id=session_id,
                        status=status,
                        extra=_note_extra(learning),
                    ),
                )
            )
    except (OSError, kb.NoteError) as exc:
        _add_failed(rt, job_id, worker, exc)
        return
    try:
        applied = _reflect(plan.get("items"), repo, stats, session_id, job_id)
    except (OSError, sqlite3.Error) as exc:  # the log or its index: retry like a note
        _add_failed(rt, job_id, worker, exc)
        return

    failpoint("after_notes")
    notes_touched = 0
    edits: list[note_edits.NoteEdit] = []
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        created = updated = deleted = proposed_n = accepted_n = 0
        for learning, note in written:
            res = record_learning(
                session,
                learning,
                note,
                source=source,
                session_id=session_id,
                signal_hash=signal_hash,
                job_id=job_id,
                repo_key=repo_key,
            )
            created += int(res.created)
            updated += int(not res.created)
            proposed_n += int(learning["status"] == PROPOSED)
            # The same learning written again, with evidence, by a later session: confirmed.
            if (
                not res.created
                and learning.get("evidence")
                and confirmations.record_confirmation(
                    session, note.id, by=confirmations.BY_UPDATE, session_id=session_id
                )
            ):
                edits.append(note_edits.confirm(note.id, now_iso))
        # Semantic twins, then UPDATEs: +1 proof from ``source``; the note follows later.
        # One that carries its own evidence from another session accepts a proposed
        # learning (ARCHITECTURE §7.1).
        model = writer != review.HEURISTIC
        # id, why, trusted, origin, with evidence, the session's words for the task
        proofs: list[tuple[str, str | None, bool, Any, bool, list[str]]] = []
        for learning, twin_id, score in twins:
            title = str(learning.get("title", ""))[:80]
            twin_why = f"semantic twin (cosine {score:.3f}) of CREATE {title!r}"
            proofs.append(
                (
                    twin_id,
                    twin_why,
                    not learning["review"],
                    learning.get("evidence_origin"),
                    bool(learning.get("evidence")),
                    list(learning.get("applies_when") or []),
                )
            )
        for upd in plan.get("updates", []):
            reason: str | None = upd.get("reason")
            if upd.get("evidence"):
                reason = f"{reason or 'confirmed'} — evidence: {upd['evidence']}"
            proofs.append(
                (
                    str(upd.get("target_id", "")),
                    reason,
                    model,
                    upd.get("evidence_origin"),
                    bool(upd.get("evidence")),
                    list(upd.get("applies_when") or []),
                )
            )
        for lid, why, trusted, origin, evidenced, phrases in proofs:
            if learnings.add_proof(session, lid, source, reason=why, job_id=job_id):
                updated += 1
                edits.append(note_edits.bump(lid, source, now_iso, phrases))
            # With evidence, from a later session: a confirmation (ledger/confirmations.py).
            if evidenced and confirmations.record_confirmation(
                session, lid, by=confirmations.BY_UPDATE, session_id=session_id
            ):
                edits.append(note_edits.confirm(lid, now_iso))
            row = session.get(Learning, lid)
            if global_cap.promote_by_proof(
                session, row, rows.get(lid), session_id, trusted, origin, why, job_id
            ):
                scoped.promoted += 1
                edits.append(note_edits.promote(lid, now_iso))
            if review.confirms(row, session_id=session_id, trusted=trusted, origin=origin):
                assert row is not None
                review.accept_row(session, row, reason=f"confirmed: {why}"[:1000], job_id=job_id)
                accepted_n += 1
                edits.append(note_edits.accept(lid, now_iso))
        # Blast radius: at most max_retire_per_day automatic retirements per UTC day in
        # all; the rest wait as proposals for a person (ledger/proposals.py).
        deletes = plan.get("deletes", [])
        # Contradiction demotion (ledger/contradiction.py) is an automatic retirement too.
        against = contradictions(session, written, repo_key)
        allowed = (
            proposals.remaining_retirements(session, s.max_retire_per_day)
            if deletes or against
            else 0
        )
        proposed = 0
        demoted = 0
        for old_id, new_id in against:
            if allowed <= 0:
                why = f"contradicted by {new_id} (its title negates this one's)"
                proposed += int(
                    proposals.propose(session, old_id, reason=why, job_id=job_id, source=source)
                )
            elif contradiction.demote(session, old_id, new_id=new_id, job_id=job_id):
                demoted += 1
                allowed -= 1
                edits.append(note_edits.supersede(old_id, new_id, now_iso))
        for dele in deletes:
            lid = dele.get("target_id", "")
            reason = str(dele.get("reason") or "retired by belief revision")
            if allowed <= 0:
                held = proposals.propose(session, lid, reason=reason, job_id=job_id, source=source)
                proposed += int(held)
            elif learnings.retire(session, lid, reason=reason, job_id=job_id):
                deleted += 1
                allowed -= 1
                edits.append(note_edits.retire(lid, reason, now_iso))
        learnings.record_chunks(session, chunk_hashes, transcript_path=source, job_id=job_id)
        # The session's watermark moves in this commit only: a failed write never moves it.
        watermarks.advance(
            session,
            harness=harness,
            session_id=session_id,
            transcript_path=source,
            planned=planned,
            job_id=job_id,
        )
        failpoint("before_commit:add")
        notes_touched = created + updated + deleted + demoted
        summary = f"created={created} updated={updated} deleted={deleted}"
        if proposed:
            summary += f" retire_proposals={proposed} (daily retire cap {s.max_retire_per_day})"
        dropped = int(plan.get("dropped_unevidenced") or 0)
        if dropped:  # CREATEs whose evidence was not in the slice (ARCHITECTURE §6)
            summary += f" dropped_unevidenced={dropped}"
        bad_ttl = int(plan.get("dropped_forget_after") or 0)
        if bad_ttl:  # a CREATE's forget_after unreadable, past or out of range: no TTL
            summary += f" dropped_forget_after={bad_ttl}"
        if proposed_n:
            summary += f" proposed={proposed_n} (waiting for review)"
        if demoted:
            summary += f" contradicted={demoted}"
        if kept_forgotten:
            summary += f" kept_forgotten={kept_forgotten}"
        summary += scoped.detail(s.max_new_global_per_session)
        if accepted_n:
            summary += f" accepted={accepted_n}"
        if applied:
            summary += " " + applied
        notes = plan.get("notes") or []
        if notes:
            summary += " notes: " + "; ".join(str(n) for n in notes)[:800]
        # The write stage's verdict, not whatever the job last showed: a person's retry of a
        # poison_add_failed (or poison_stage_error) job that now succeeds ends "ok".
        outcome = str((job.result or {}).get("outcome") or "ok")
        note_edits.record(job, edits)
        finish(session, job, outcome=outcome, detail=summary, worker=worker)
    failpoint("after_commit:add")
    if edits:
        note_edits.apply(rt, job_id, edits)
    if notes_touched and not s.skip_reindex:
        rt.dispatcher.kb_changed()


ADD = Stage("add", claim=_claim, step=_add, preview=no_preview)


#: Seconds the whole add may spend finding anchors (ARCHITECTURE §7: the cost bound).
ANCHOR_BUDGET_SEC = 2.0


def _own_id(learning: dict[str, Any]) -> str:
    """The note id a CREATE gets (``lrn-<slug>-<hash6>`` of its title and rule)."""
    return kb.learning_id(str(learning.get("title", "")), str(learning.get("rule", "")))


def _reflect(
    items: Any, repo: Any, stats: dict[str, Any], session_id: str | None, job_id: str
) -> str:
    """Apply the reflector's part of the answer to the repository's Reflection Store.

    Runs before the ledger commit: every event id is derived from the job, so a crash
    anywhere is healed by the ordinary add retry (nothing is appended twice), and the
    counts land in the job's done event detail in the same commit.

    Returns:
        The counts (``items: updated=… ignored=…``), or ``""`` when the answer had no
        items part or the job's repository has no store.

    Raises:
        OSError: A log could not be written.
        sqlite3.Error: The store's index could not be read (e.g. locked too long).
    """
    if not isinstance(items, dict):
        return ""
    unproven = int(items.get("unevidenced") or 0)
    tail = f" unevidenced={unproven}" if unproven else ""  # closes/adds without a quote
    if not (items.get("update") or items.get("new") or items.get("summary")):
        return f"items:{tail}" if tail else ""
    try:
        store = reflector.job_store(repo)
    except RepoError as exc:
        log.warning("reflection store unavailable", job_id=job_id, error=str(exc))
        return f"items: not applied ({exc})"[:300]
    if store is None:
        return "items: not applied (the transcript's repository is unknown)"
    try:
        offered = [u for u in stats.get("items_offered") or [] if isinstance(u, str)]
        done = reflector.apply(store, items, offered=offered, session=session_id, job_id=job_id)
    finally:
        store.close()
    return done.detail() + tail


def _add_failed(rt: Runtime, job_id: str, worker: str, exc: Exception) -> None:
    """Disk full, permissions, a note that does not parse back: nothing is committed, the
    paid answer stays on the job, and the add stage retries with backoff (then poisons)."""
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        prior = int((job.result or {}).get("add_failures", 0))
        add_failures = prior + 1
        job.result = {**(job.result or {}), "add_failures": add_failures}
        job.error = f"add failed: {type(exc).__name__}: {exc}"
        control.record_error(
            session, kind="add_failed", message=job.error, context={"job_id": job_id}
        )
        # Counted apart from the write's failures (a paid answer is not poisoned by its
        # call's retries), by the same rule as every other failure.
        if retries_exhausted(prior, rt.settings.max_retries):
            finish(
                session,
                job,
                outcome="poison_add_failed",
                state="poisoned",
                detail=job.error,
                worker=worker,
            )
            return
        until = utcnow() + backoff(rt, add_failures)
        transition(
            session,
            job,
            to_state="retrying",
            detail=job.error,
            next_run_at=until,
            worker=worker,
        )
        log_transition(job)
    rt.dispatcher.schedule("add", job_id, until)
