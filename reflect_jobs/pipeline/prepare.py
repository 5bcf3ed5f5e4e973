"""The prepare stage: the $0 cascade that decides whether a transcript is worth a paid call.

It reads the transcript and runs the pure ``cascade.prepare`` over a read-only ledger view
(each question in its own short transaction; no lock is held while scoring). The verdict is
either a free terminal outcome (stale, unchanged, unreadable, no signal, duplicate signal
set — the last one adds proof to the learnings it duplicates) or a private slice file and
the job queued at ``write``. A dry run computes and logs the verdict and moves nothing.

The gates asked before the cascade (running pass, transcript gone, ignored, unchanged,
data boundary, checkpoints) are :mod:`.prepare_gates`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from reflect_jobs import kb
from reflect_jobs.cascade import Prepared, RelatedCandidate, Signal, origins
from reflect_jobs.cascade import prepare as cascade_prepare
from reflect_jobs.checkpoints import BELOW_CHECKPOINT
from reflect_jobs.gates import Defer, first_defer
from reflect_jobs.index import semantic
from reflect_jobs.ledger import captures, checkpoints, costs, gateway, learnings, watermarks
from reflect_jobs.ledger.gateway import JobRow, transition
from reflect_jobs.ledger.view import LedgerView
from reflect_jobs.nightly.commits import session_commits
from reflect_jobs.nightly.observations import observations_block
from reflect_jobs.recall.scope import transcript_repo
from reflect_jobs.reflections.candidates import Offer
from reflect_jobs.reflections.reflector import offer_for_job
from reflect_jobs.transcripts import UnreadableTranscript, read_transcript

from .middleware import Held, Stage, StageRun, run_stage
from .prepare_gates import CheckpointGate, PrepTicket, RunningPass, free_gates
from .reflect_pass import joined, plan_reflection
from .runtime import Runtime, defer, finish, log, log_transition, owned_row

SemanticLookup = Callable[[list[Signal]], list[tuple[RelatedCandidate, float]]]


def semantic_related(rt: Runtime, view: LedgerView) -> SemanticLookup | None:
    """Related learnings by embedding similarity, when a vector index exists.

    Args:
        rt: The runtime (for the KB path).
        view: The ledger view that resolves hit ids to candidates.

    Returns:
        A lookup from the transcript's signals to ``(candidate, cosine)`` pairs (cosine
        ≥ 0.5, at most five), or None when vectors are disabled.
    """
    s = rt.settings
    if not s.index_vectors:
        return None

    def lookup(signals: list[Signal]) -> list[tuple[RelatedCandidate, float]]:
        text = "\n".join(sig.text for sig in signals[:20])
        hits = [
            (doc, score)
            for doc, score in semantic.similar(
                s.kb_path, text, k=5, vectors=True, embed_model=s.embed_model
            )
            if score >= 0.5
        ]
        if not hits:
            return []
        found = view.candidates_by_id([d for d, _ in hits])
        return [(found[doc], float(score)) for doc, score in hits if doc in found]

    return lookup


def _cascade(
    rt: Runtime, path: str, harness: str, base: watermarks.Mark | None = None
) -> tuple[Prepared, dict[str, Any]]:
    """Read the transcript (checking the session's watermark ``base`` in the same pass) and
    run the pure cascade over read-only ledger views; returns it with the watermark plan."""
    view = LedgerView(rt.db)
    transcript = read_transcript(path, harness=harness, prefix_at=base.offset if base else None)
    planned = watermarks.plan(
        base,
        transcript.prefix_digest,
        watermarks.Mark(transcript.end_offset, transcript.end_digest),
    )
    prepared = cascade_prepare(
        transcript,
        view,
        source_name=os.path.basename(path),
        max_chars=rt.settings.max_input_chars,
        semantic=semantic_related(rt, view),
        since_offset=planned["since"],
    )
    return prepared, planned


def run_prepare(rt: Runtime, job_id: str) -> None:
    """The $0 cascade: skip, or write the slice and queue the paid write.

    Through the stage chain (``middleware.run_stage``: stage errors, kill switch, dry run
    — which logs the verdict and moves nothing — and the claim with its one-pass-per-session
    gate), then the free gates (:func:`free_gates`) and the cascade.

    Args:
        rt: The runtime.
        job_id: The job to prepare (a no-op unless it is due at stage ``prepare``).
    """
    run_stage(PREPARE, rt, job_id)


def _claim(run: StageRun, session: Connection, job: JobRow) -> PrepTicket | Held:
    """Inside the claim's transaction (the ledger gateway's): the running-pass gate, then
    what prepare reads; ``accepting`` is written with the claim's commit."""
    held = RunningPass(session, job).acquire()
    if isinstance(held, Defer):
        assert held.until is not None
        defer(session, job, held.until, held.reason, run.worker)
        until = held.until
        return Held(lambda: run.rt.dispatcher.schedule("prepare", run.job_id, until))
    # From here on a new capture of this session is a new job (a grown transcript).
    job.accepting = False
    return _ticket(session, job)


def _ticket(session: Connection, job: JobRow) -> PrepTicket:
    path, harness, session_id = job.transcript_path, job.harness, job.session_id
    prev = captures.last_transcript(session, path)
    # what the previous capture of this transcript already scanned for the fill
    floor = prev.size if prev is not None and prev.size else 0
    if job.transcript_size is not None and floor > job.transcript_size:
        floor = 0  # the file shrank (rewritten): read it all
    unchanged = (
        prev is not None
        and prev.last_job_id != job.id
        and prev.size is not None
        and prev.size == job.transcript_size
        and prev.mtime == job.transcript_mtime
        and (prev.last_outcome or "").startswith(("ok", "skip_"))
        # a Stop that made no pass reflected nothing: the deep pass after it must run
        and prev.last_outcome != BELOW_CHECKPOINT
    )
    return PrepTicket(
        path=path,
        harness=harness,
        session_id=session_id,
        base=watermarks.current(session, harness, session_id, path),
        cp_state=checkpoints.state(session, harness, session_id, path),
        deep=bool(job.deep),
        cwd=job.cwd,
        unchanged=unchanged,
        floor=floor,
    )


def _prepare(run: StageRun) -> None:
    """The free gates, the cascade, the slice; then the verdict committed under our lease."""
    rt, job_id, worker, t = run.rt, run.job_id, run.worker, run.ticket
    path, harness, session_id = t.path, t.harness, t.session_id
    outcome: str | None = None
    detail = ""
    prepared = None
    planned: dict[str, Any] = {}
    gates = free_gates(rt, t)
    checkpoint = gates[-1]
    assert isinstance(checkpoint, CheckpointGate)
    stopped = first_defer(gates)
    pass_plan = checkpoint.plan
    if stopped is not None:
        outcome, detail = stopped.outcome, stopped.reason
    else:
        try:
            prepared, planned = _cascade(rt, path, harness, t.base)
        except UnreadableTranscript as exc:
            outcome, detail = "skip_unreadable", str(exc)
        except OSError as exc:
            outcome, detail = "skip_unreadable", f"{type(exc).__name__}: {exc}"
        if prepared is not None and prepared.action == "skip":
            outcome, detail = "skip_" + prepared.reason, f"signals={prepared.signal_count}"
            if prepared.detail:
                detail += f"; {prepared.detail}"

    slice_path: Path | None = None
    repo = transcript_repo(path) if prepared is not None else None
    # The commits this pass's part of the transcript shows the session made (revert
    # demotion, docs/NIGHTLY.md): read from the raw bytes after the watermark, bounded.
    made = session_commits(path, int(planned.get("since") or 0)) if prepared is not None else []
    offered = Offer()
    # Every working session is reflected at its passes, signal or not (reflect_pass.py).
    reflection = plan_reflection(
        rt.settings,
        path=path,
        harness=harness,
        prepared=prepared,
        planned=planned,
        pass_kind=pass_plan.kind if pass_plan is not None else "none",
    )
    skipped = outcome
    if outcome is not None and reflection.makes_pass:
        outcome = None  # a reflection-only pass: the learning cascade had nothing new
    elif outcome is not None and reflection.why and prepared is not None:
        detail += f"; {reflection.why}"
    slice_text, slice_codes = "", ""
    if outcome is None and prepared is not None:
        slice_text, slice_codes = joined(prepared, reflection)
        # The reflection items the one paid call may close or add to ($0, ARCHITECTURE §14).
        offered, why = offer_for_job(repo, session_id, slice_text)
        if why:
            log.warning("reflection store not offered", job_id=job_id, error=why)
        # The scope's consolidated observations (weekly synthesis, docs/NIGHTLY.md): after
        # the dialogue, outside the evidence lines, so the model does not restate them.
        observed = observations_block(rt.settings.kb_path, (repo or {}).get("key"))
        slice_path = rt.settings.slices_dir / f"{job_id}.txt"
        # Slices hold user dialogue: a private directory and file, written atomically.
        slice_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        kb.atomic_write(slice_path, slice_text + offered.block + observed, mode=0o600)

    with owned_row(rt, job_id, worker) as (session, job):
        if job is None:
            return
        if pass_plan is not None:
            checkpoints.record(
                session,
                harness=harness,
                session_id=session_id,
                transcript_path=path,
                plan=pass_plan,
                idle_sec=rt.settings.session_idle_sec,
            )
            job.prepare_stats = {"pass": pass_plan.stats()}
        if prepared is not None:
            job.signal_hash = prepared.signal_hash
            job.prepare_stats = {
                "signal_count": prepared.signal_count,
                "orig_chars": prepared.orig_chars,
                "slice_chars": len(slice_text or prepared.slice_text),
                "chunks_total": prepared.chunks_total,
                "chunks_skipped": prepared.chunks_skipped,
                "related": len(prepared.related_ids),
                "redactions": prepared.redactions,
                "reason": prepared.reason,
                "lines_before_watermark": prepared.lines_before_watermark,
                "context_lines": prepared.context_lines,
                # read back by the add stage, which advances the session's watermark
                "watermark": planned,
                # The repository its learnings are scoped to (ARCHITECTURE §13).
                "repo": repo,
                # Who wrote each slice line, run-length encoded: the write stage locates
                # each learning's evidence in it (ARCHITECTURE §6, evidence_origin).
                "origins": origins.encode(slice_codes or prepared.slice_origins),
                # The condensed transcript the reflection items were read from (§14.1).
                "reflection": reflection.stats(),
                # The add stage changes only these items (the ids the prompt offered).
                "items_offered": offered.uids,
                # Which pass this is and its model (read by the write stage; §14.1).
                "pass": pass_plan.stats() if pass_plan is not None else None,
                # Commits the session made in this part (the nightly revert check).
                "commits": made,
            }
        if skipped == "skip_dup_signal_hash" and prepared is not None:
            with gateway.orm(session) as orm:
                bumped = sum(
                    learnings.add_proof(
                        orm, lid, path, reason="same signal set seen again", job_id=job_id
                    )
                    for lid in prepared.dup_learning_ids
                )
            detail += f" proof_bumped={bumped}"
        if outcome is not None:
            costs.record_free(session, job, outcome)
            finish(session, job, outcome=outcome, detail=detail, worker=worker)
            return
        assert prepared is not None and slice_path is not None
        job.slice_path = str(slice_path)
        job.chunk_hashes = list(prepared.new_chunk_hashes)
        job.related_ids = list(prepared.related_ids)
        what = (
            f"slice {len(slice_text)} chars, {prepared.signal_count} signals"
            + (f"; {reflection.why}" if reflection.why else "")
            + (f" (learning cascade: {skipped})" if skipped else "")
        )
        transition(
            session,
            job,
            to_state="queued",
            to_stage="write",
            detail=what + (f"; {pass_plan.reason}, model {pass_plan.model}" if pass_plan else ""),
            worker=worker,
        )
        log_transition(job)
    rt.dispatcher.schedule("write", job_id)


def _preview(run: StageRun) -> None:
    """Dry run: compute and log the cascade's verdict; the job is left exactly as found."""
    rt, job_id = run.rt, run.job_id
    with gateway.transaction(rt.db) as session:
        job = gateway.load(session, job_id)
        if job is None or job.stage != "prepare":
            return
        t = _ticket(session, job)
    gates = free_gates(rt, t)
    checkpoint = gates[-1]
    assert isinstance(checkpoint, CheckpointGate)
    stopped = first_defer(gates)
    if stopped is not None:
        below = stopped.outcome == BELOW_CHECKPOINT
        reason = stopped.reason if below else stopped.outcome.removeprefix("skip_")
        log.info(
            "dry run: prepare", job_id=job_id, action="skip", reason=reason, detail=stopped.reason
        )
        return
    assert checkpoint.plan is not None
    try:
        prepared, planned = _cascade(rt, t.path, t.harness, t.base)
    except (UnreadableTranscript, OSError) as exc:
        log.info(
            "dry run: prepare", job_id=job_id, action="skip", reason="unreadable", detail=str(exc)
        )
        return
    reflection = plan_reflection(
        rt.settings,
        path=t.path,
        harness=t.harness,
        prepared=prepared,
        planned=planned,
        pass_kind=checkpoint.plan.kind,
    )
    log.info(
        "dry run: prepare",
        job_id=job_id,
        action=prepared.action,
        reason=prepared.reason,
        slice_chars=len(prepared.slice_text) + len(reflection.section),
        would_call=prepared.action == "reflect" or reflection.makes_pass,
        reflection=reflection.why,
        model=checkpoint.plan.model,
    )


PREPARE = Stage("prepare", claim=_claim, step=_prepare, preview=_preview)
