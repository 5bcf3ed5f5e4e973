"""Stage runners: load the job, call the pure stage logic, record the transition.

Each runner follows the same shape so that it is idempotent and crash-safe:

1. *claim* the job for its stage in one short transaction (a second delivery, a recovery
   duplicate or another consumer gets ``None`` and returns: nothing happens twice);
2. do the work **outside** any transaction (reading a transcript, calling the model,
   writing notes) — a ledger lock is never held across I/O;
3. *commit* the outcome and the job event together, but only while our lease still holds
   (a worker presumed dead must not overwrite the job its replacement now owns);
4. hand the next stage to the dispatcher (Huey in production, a list in unit tests).

Nothing here imports Huey; ``tasks.py`` wraps these functions as Huey tasks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from . import kb
from .cascade import RelatedCandidate
from .cascade import prepare as cascade_prepare
from .config import Settings
from .faults import failpoint
from .index import semantic
from .ledger import control, costs, learnings
from .ledger.db import session_scope
from .ledger.jobs import claim, record_capture, transition, worker_id
from .ledger.models import Job, Transcript, utcnow
from .limits import Caps, Deferral
from .transcripts import UnreadableTranscript, read_transcript
from .writer.actions import UnparseableOutput, parse_actions, plan_actions
from .writer.backends import make_backend
from .writer.outcomes import (
    AttemptContext,
    AttemptOutcome,
    backend_missing_outcome,
    classify_attempt,
)
from .writer.prompt import build_prompt
from .writer.quota import bucket_of, extract_rate_limits, quota_gate
from .writer.result import BackendMissing, ModelResult

log = structlog.get_logger("reflect_jobs.pipeline")

# Error-ledger kinds per outcome (SPEC §5.11), with B18 fixed: paid failures are reported too.
ERROR_KINDS = {
    "poison_writer_drift": ("drain_poison", "error"),
    "poison_budget": ("drain_budget_exceeded", "error"),
    "poison_timeout_exit_124": ("drain_timeout_exhausted", "warn"),
    "partial_max_turns": ("drain_max_turns_partial", "warn"),
    "fail_unknown_command": ("drain_unknown_command", "error"),
    "fail_backend_missing": ("drain_unknown_command", "error"),
    "quarantine_oversized": ("drain_quarantine_oversized", "warn"),
    "poison_retries_exhausted": ("drain_poison", "error"),
}


class Dispatcher(Protocol):
    """Where a runner hands the next step (Huey in production)."""

    def schedule(self, stage: str, job_id: str, eta: datetime | None = None) -> None: ...

    def kb_changed(self) -> None: ...


@dataclass
class Runtime:
    settings: Settings
    dispatcher: Dispatcher
    caps: Caps
    worker: str = ""

    @property
    def db(self) -> str:
        return self.settings.db_url

    def who(self) -> str:
        return self.worker or worker_id()


@contextlib.contextmanager
def owned(rt: Runtime, job_id: str, worker: str) -> Iterator[tuple[Session, Job | None]]:
    """A transaction holding ``job_id`` only if our lease on it still stands."""
    with session_scope(rt.db) as session:
        job = session.get(Job, job_id, populate_existing=True)
        if job is None or job.state != "running" or job.lease_owner != worker:
            log.warning("lease lost", job_id=job_id, worker=worker)
            yield session, None
        else:
            yield session, job


def _log_transition(job: Job, **extra: Any) -> None:
    log.info(
        "transition", job_id=job.id, stage=job.stage, state=job.state, outcome=job.outcome, **extra
    )


def finish(
    session: Session,
    job: Job,
    *,
    outcome: str,
    state: str = "done",
    detail: str | None = None,
    worker: str | None = None,
) -> None:
    """A terminal transition plus the bookkeeping every terminal job gets."""
    transition(
        session,
        job,
        to_state=state,
        to_stage="done" if state == "done" else None,
        outcome=outcome,
        detail=detail,
        worker=worker,
    )
    if state == "done":
        _remember_transcript(session, job)
        _drop_slice(job)
    _log_transition(job, detail=detail)


def _remember_transcript(session: Session, job: Job) -> None:
    row = session.get(Transcript, job.transcript_path)
    if row is None:
        row = Transcript(path=job.transcript_path)
        session.add(row)
    row.harness = job.harness
    row.session_id = job.session_id
    row.last_job_id = job.id
    row.last_outcome = job.outcome
    row.size = job.transcript_size
    row.mtime = job.transcript_mtime
    row.updated_at = utcnow()


def _drop_slice(job: Job) -> None:
    if job.slice_path:
        with contextlib.suppress(OSError):
            os.unlink(job.slice_path)


# --- capture ---------------------------------------------------------------------------


def run_capture(
    rt: Runtime,
    harness: str,
    session_id: str,
    transcript_path: str,
    event: str = "unknown",
    settle_sec: int | None = None,
) -> str | None:
    """Record (or coalesce) the capture and schedule prepare after the settle delay."""
    if rt.settings.disabled:
        return None
    try:
        st = os.stat(transcript_path)
        size, mtime = st.st_size, st.st_mtime
    except OSError:
        size, mtime = None, None
    settle = rt.settings.capture_settle_sec if settle_sec is None else settle_sec
    with session_scope(rt.db) as session:
        res = record_capture(
            session,
            harness=harness,
            session_id=session_id or "unknown",
            transcript_path=transcript_path,
            event=event,
            size=size,
            mtime=mtime,
            settle_sec=settle,
        )
    log.info(
        "captured",
        job_id=res.job_id,
        created=res.created,
        harness=harness,
        session_id=session_id,
        hook_event=event,
    )
    # Always (re)schedule: a coalesced capture pushed the settle time out, and the earlier
    # message will find the job not yet due. Extra messages are harmless no-op claims.
    rt.dispatcher.schedule("prepare", res.job_id, res.prepare_at if settle > 0 else None)
    return res.job_id


# --- prepare ---------------------------------------------------------------------------


class _LedgerView:
    """cascade.LedgerView over short, separate transactions (prepare is CPU-bound)."""

    def __init__(self, db: str) -> None:
        self.db = db

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]:
        with session_scope(self.db) as s:
            return learnings.LedgerView(s).seen_chunk_hashes(hashes)

    def related_candidates(self, limit: int = 1000):  # type: ignore[no-untyped-def]
        with session_scope(self.db) as s:
            return learnings.LedgerView(s).related_candidates(limit)

    def learnings_with_signal_hash(self, signal_hash: str) -> list[str]:
        with session_scope(self.db) as s:
            return learnings.LedgerView(s).learnings_with_signal_hash(signal_hash)


def _semantic_related(rt: Runtime):  # type: ignore[no-untyped-def]
    """Related learnings by embedding similarity, when a vector index exists."""
    if not semantic.vectors_enabled():
        return None

    def lookup(signals):  # type: ignore[no-untyped-def]
        text = "\n".join(sig.text for sig in signals[:20])
        hits = [
            (doc, score)
            for doc, score in semantic.similar(rt.settings.kb_path, text, k=5)
            if score >= 0.5
        ]
        if not hits:
            return []
        with session_scope(rt.db) as session:
            rows = {
                r.id: r
                for r in session.scalars(
                    select(learnings.Learning).where(
                        learnings.Learning.id.in_([d for d, _ in hits])
                    )
                )
            }
            return [
                (
                    RelatedCandidate(
                        id=r.id,
                        title=r.title,
                        category=r.category,
                        status=r.status,
                        proof_count=r.proof_count,
                        created_at=r.created_at.isoformat(),
                    ),
                    float(score),
                )
                for doc, score in hits
                if (r := rows.get(doc)) is not None
            ]

    return lookup


def _cascade(rt: Runtime, path: str, harness: str):  # type: ignore[no-untyped-def]
    """Read the transcript and run the pure cascade over read-only ledger views."""
    return cascade_prepare(
        read_transcript(path, harness=harness),
        _LedgerView(rt.db),
        source_name=os.path.basename(path),
        max_chars=rt.settings.max_input_chars,
        semantic=_semantic_related(rt),
    )


def run_prepare(rt: Runtime, job_id: str) -> None:
    """The $0 cascade: skip, or write the slice and queue the paid write."""
    worker = rt.who()
    if rt.settings.disabled:
        return
    if rt.settings.dry_run:
        _dry_run_prepare(rt, job_id)
        return
    with session_scope(rt.db) as session:
        job = claim(session, job_id, "prepare", worker=worker, lease_sec=rt.settings.lease_sec)
        if job is None:
            return
        # From here on a new capture of this session is a new job (a grown transcript).
        job.accepting = False
    failpoint("after_claim:prepare")
    with session_scope(rt.db) as session:
        job = session.get(Job, job_id)
        assert job is not None
        path, harness = job.transcript_path, job.harness
        prev = session.get(Transcript, path)
        unchanged = (
            prev is not None
            and prev.last_job_id != job.id
            and prev.size is not None
            and prev.size == job.transcript_size
            and prev.mtime == job.transcript_mtime
            and (prev.last_outcome or "").startswith(("ok", "skip_"))
        )
    outcome: str | None = None
    detail = ""
    prepared = None
    if not os.path.exists(path):
        outcome, detail = "stale", f"transcript no longer exists: {path}"
    elif unchanged:
        outcome, detail = "skip_unchanged", "transcript unchanged since its last job"
    else:
        try:
            prepared = _cascade(rt, path, harness)
        except UnreadableTranscript as exc:
            outcome, detail = "skip_unreadable", str(exc)
        except OSError as exc:
            outcome, detail = "skip_unreadable", f"{type(exc).__name__}: {exc}"
        if prepared is not None and prepared.action == "skip":
            outcome, detail = "skip_" + prepared.reason, f"signals={prepared.signal_count}"

    slice_path: Path | None = None
    if outcome is None and prepared is not None:
        slice_path = rt.settings.slices_dir / f"{job_id}.txt"
        # Slices hold user dialogue: a private directory and file, written atomically.
        slice_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        kb.atomic_write(slice_path, prepared.slice_text, mode=0o600)

    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        if prepared is not None:
            job.signal_hash = prepared.signal_hash
            job.prepare_stats = {
                "signal_count": prepared.signal_count,
                "orig_chars": prepared.orig_chars,
                "slice_chars": len(prepared.slice_text),
                "chunks_total": prepared.chunks_total,
                "chunks_skipped": prepared.chunks_skipped,
                "related": len(prepared.related_ids),
                "redactions": prepared.redactions,
                "reason": prepared.reason,
            }
        if outcome is not None:
            if outcome == "skip_dup_signal_hash" and prepared is not None:
                bumped = sum(
                    learnings.add_proof(
                        session, lid, path, reason="same signal set seen again", job_id=job_id
                    )
                    for lid in prepared.dup_learning_ids
                )
                detail += f" proof_bumped={bumped}"
            costs.record_free(session, job, outcome)
            finish(session, job, outcome=outcome, detail=detail, worker=worker)
            return
        assert prepared is not None and slice_path is not None
        job.slice_path = str(slice_path)
        job.chunk_hashes = list(prepared.new_chunk_hashes)
        job.related_ids = list(prepared.related_ids)
        transition(
            session,
            job,
            to_state="queued",
            to_stage="write",
            detail=f"slice {len(prepared.slice_text)} chars, {prepared.signal_count} signals",
            worker=worker,
        )
        _log_transition(job)
    rt.dispatcher.schedule("write", job_id)


def _dry_run_prepare(rt: Runtime, job_id: str) -> None:
    """Dry run: compute and log the cascade's verdict; the job is left exactly as found."""
    with session_scope(rt.db) as session:
        job = session.get(Job, job_id)
        if job is None or job.stage != "prepare":
            return
        path, harness = job.transcript_path, job.harness
    try:
        prepared = _cascade(rt, path, harness)
        log.info(
            "dry run: prepare",
            job_id=job_id,
            action=prepared.action,
            reason=prepared.reason,
            slice_chars=len(prepared.slice_text),
            would_call=prepared.action == "reflect",
        )
    except (UnreadableTranscript, OSError) as exc:
        log.info(
            "dry run: prepare", job_id=job_id, action="skip", reason="unreadable", detail=str(exc)
        )


# --- write (the only paid step) --------------------------------------------------------


def _defer(session: Session, job: Job, until: datetime, reason: str, worker: str) -> None:
    transition(session, job, to_state="deferred", next_run_at=until, detail=reason, worker=worker)
    _log_transition(job, reason=reason, until=until.isoformat())


def _backoff(rt: Runtime, failures: int) -> timedelta:
    return timedelta(seconds=rt.settings.retry_base_sec * (2 ** max(failures - 1, 0)))


@dataclass
class _WriteTicket:
    """What the write stage took from the ledger when it claimed the job."""

    ctx: AttemptContext
    slice_path: str | None
    related: list[str]
    recorded: ModelResult | None  # an answer paid for before a crash, to reuse
    cost_row_id: int | None


def run_write(rt: Runtime, job_id: str) -> None:
    """Gates, one model call (or a recorded answer reused), outcome as a job state.

    The gates run in order, each free: kill switch and dry run (no claim at all), then —
    inside the claim transaction — the write-stage halt and the quota gate, then a missing
    slice (back to prepare), and last the caps, which reserve the budget unit right before
    the call. Anything that holds the job defers it; nothing here fails or charges a job.
    """
    s = rt.settings
    worker = rt.who()
    if s.disabled:
        return
    if s.dry_run:
        # Read-only by contract (SPEC §5.10 as documented for 5.2.5): no claim, no call,
        # no cost row, no budget; the log says what would have run.
        log.info(
            "dry run: would call model",
            job_id=job_id,
            backend=s.resolved_writer_backend(),
            model=s.model,
        )
        return
    ticket = _claim_for_write(rt, job_id, worker)
    if ticket is None:
        return
    failpoint("after_claim:write")
    reservation = None
    result, missing = ticket.recorded, None
    if result is not None:
        log.info("reusing recorded answer", job_id=job_id, cost_row=ticket.cost_row_id)
    else:
        if not ticket.slice_path or not os.path.exists(ticket.slice_path):
            _back_to_prepare(rt, job_id, worker)
            return
        backend_name = s.resolved_writer_backend()
        # The heuristic writer calls no model: it costs nothing, so it takes no budget unit.
        booked = rt.caps.reserve() if backend_name != "heuristic" else None
        if isinstance(booked, Deferral):
            with owned(rt, job_id, worker) as (session, job):
                if job is not None:
                    _defer(session, job, booked.until, booked.reason, worker)
            rt.dispatcher.schedule("write", job_id, booked.until)
            return
        reservation = booked
        result, missing = _call_model(rt, job_id, backend_name, ticket)
        if result is not None:
            ticket.cost_row_id = _record_answer(rt, job_id, result)
            failpoint("after_record")
    outcome, plan = _decide(result, missing, ticket)
    if outcome.entries == 0 and reservation is not None:
        rt.caps.refund(reservation)
    _record_outcome(rt, job_id, worker, ticket, result, outcome, plan)


def _claim_for_write(rt: Runtime, job_id: str, worker: str) -> _WriteTicket | None:
    """Claim the job and apply the ledger gates (halt, quota) in the same transaction."""
    s = rt.settings
    with session_scope(rt.db) as session:
        job = claim(session, job_id, "write", worker=worker, lease_sec=s.lease_sec)
        if job is None:
            return None
        reason = control.halt_reason(session)
        if reason:
            transition(
                session,
                job,
                to_state="halted",
                detail=f"write stage halted: {reason}",
                worker=worker,
            )
            _log_transition(job)
            return None
        pending = costs.pending_attempt(session, job_id)
        recorded = (
            ModelResult.from_json(pending.raw_answer) if pending and pending.raw_answer else None
        )
        if recorded is None and s.quota_gate:
            decision = quota_gate(
                control.quota_snapshots(session),
                now=time.time(),
                ttl_sec=s.quota_ttl_sec,
                util_threshold=s.quota_util_threshold,
                api_key_auth=s.api_key_auth,
            )
            if not decision.open:
                until = utcnow() + timedelta(seconds=min(s.quota_ttl_sec, 900))
                _defer(session, job, until, f"quota gate closed: {decision.reason}", worker)
                control.record_error(
                    session, kind="drain_quota_deferred", severity="warn", message=decision.reason
                )
                rt.dispatcher.schedule("write", job_id, until)
                return None
        ctx = AttemptContext(
            prior_failures=job.failures,
            prior_timeouts=job.timeouts,
            invalid_streak=job.invalid_streak,
            max_retries=s.max_retries,
            timeout_retries=s.timeout_retries,
            invalid_threshold=s.invalid_threshold,
            token_max=s.token_max,
            expect_actions=s.writer_mode == "extract",
        )
        return _WriteTicket(
            ctx,
            job.slice_path,
            list(job.related_ids or []),
            recorded,
            pending.id if pending else None,
        )


def _back_to_prepare(rt: Runtime, job_id: str, worker: str) -> None:
    """The slice is gone (deleted, disk cleaned): rebuild it instead of failing the job."""
    with owned(rt, job_id, worker) as (session, job):
        if job is not None:
            transition(
                session,
                job,
                to_state="queued",
                to_stage="prepare",
                detail="slice file missing; preparing again",
                worker=worker,
                next_run_at=utcnow(),
            )
    rt.dispatcher.schedule("prepare", job_id)


def _call_model(
    rt: Runtime, job_id: str, backend_name: str, ticket: _WriteTicket
) -> tuple[ModelResult | None, str | None]:
    """The one paid call. Returns (answer, None) or (None, why the backend is missing)."""
    s = rt.settings
    assert ticket.slice_path is not None
    prompt = build_prompt(
        Path(ticket.slice_path).read_text(encoding="utf-8"), allowed_ids=ticket.related
    )
    try:
        backend = make_backend(
            backend_name,
            claude_bin=s.claude_bin,
            model=s.model,
            cwd=str(s.writer_cwd),
            drain_timeout=s.timeout_sec,
            writer_mode=s.writer_mode,
            max_turns=s.max_turns,
        )
        log.info("model call", job_id=job_id, backend=backend_name, prompt_chars=len(prompt))
        return backend.call(prompt), None
    except BackendMissing as exc:
        return None, str(exc)


def _record_answer(rt: Runtime, job_id: str, result: ModelResult) -> int:
    """Record before parse: the answer, its cost and its quota telemetry are durable before
    anything can fail on them; a crash from here on never pays twice."""
    with session_scope(rt.db) as session:
        job = session.get(Job, job_id)
        assert job is not None
        row = costs.record_attempt(session, job, result)
        job.attempts += 1
        session.flush()
        snaps = extract_rate_limits(result.raw_stdout, result.stderr) or result.rate_limit_info
        if snaps:
            control.store_quota_snapshots(session, snaps, bucket_of)
        return row.id


def _decide(
    result: ModelResult | None, missing: str | None, ticket: _WriteTicket
) -> tuple[AttemptOutcome, Any]:
    """Score the attempt (SPEC §5.6 via classify_attempt) and plan its actions."""
    if result is None:
        return backend_missing_outcome(missing or "backend missing"), None
    outcome = classify_attempt(result, ticket.ctx)
    plan = None
    if outcome.disposition == "ok" and ticket.ctx.expect_actions:
        try:
            plan = plan_actions(parse_actions(result.text), allowed_ids=set(ticket.related))
        except UnparseableOutput:  # classify_attempt already checks; keep the guard
            outcome = AttemptOutcome("fail_unparseable", 1, "retry", "prose", "unparseable actions")
    if result.backend == "heuristic" and outcome.entries:
        outcome = dataclasses.replace(outcome, entries=0)
    return outcome, plan


def _record_outcome(
    rt: Runtime,
    job_id: str,
    worker: str,
    ticket: _WriteTicket,
    result: ModelResult | None,
    outcome: AttemptOutcome,
    plan: Any,
) -> None:
    """Charge (or not), log errors, and move the job to the state its outcome maps to."""
    disp = outcome.disposition
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        row = session.get(costs.CostRow, ticket.cost_row_id) if ticket.cost_row_id else None
        if row is not None:
            row.outcome = outcome.outcome
            row.entries = outcome.entries
            row.writer_class = outcome.writer_class
            row.consumed = True
        elif outcome.entries == 0:
            costs.record_free(
                session, job, outcome.outcome, backend=rt.settings.resolved_writer_backend()
            )
        job.invalid_streak = 0 if outcome.writer_class in ("valid", "") else job.invalid_streak + 1
        context = {"job_id": job_id, "transcript_path": job.transcript_path}
        kind = ERROR_KINDS.get(outcome.outcome)
        if kind:
            control.record_error(
                session,
                kind=kind[0],
                severity=kind[1],
                message=f"{outcome.outcome}: {outcome.detail}",
                context=context,
            )
        if disp != "ok":
            job.error = outcome.detail
        if disp == "ok":
            job.result = {"outcome": outcome.outcome, "detail": outcome.detail}
            job.actions = _plan_json(plan)
            transition(
                session,
                job,
                to_state="queued",
                to_stage="add",
                outcome=outcome.outcome,
                detail=outcome.detail,
                worker=worker,
                next_run_at=utcnow(),
            )
            _log_transition(job)
        elif disp == "retry":
            job.failures += 1
            if result is not None and result.timed_out:
                job.timeouts += 1
            until = utcnow() + _backoff(rt, job.failures)
            control.record_error(
                session,
                kind="drain_write_failed",
                severity="warn",
                message=f"{outcome.outcome}: {outcome.detail}",
                context=context,
            )
            transition(
                session,
                job,
                to_state="retrying",
                outcome=outcome.outcome,
                detail=outcome.detail,
                next_run_at=until,
                worker=worker,
            )
            _log_transition(job, retry_at=until.isoformat())
        elif disp == "halt":
            control.set_flag(
                session, control.HALT_KEY, f"{outcome.outcome}: {outcome.detail}"[:500]
            )
            transition(
                session,
                job,
                to_state="halted",
                outcome=outcome.outcome,
                detail=outcome.detail,
                worker=worker,
            )
            _log_transition(job)
        else:  # done | poison | quarantine: terminal
            state = {"done": "done", "quarantine": "quarantined"}.get(disp, "poisoned")
            finish(
                session,
                job,
                outcome=outcome.outcome,
                state=state,
                detail=outcome.detail,
                worker=worker,
            )
        next_eta = job.next_run_at
    if disp == "ok":
        rt.dispatcher.schedule("add", job_id)
    elif disp == "retry":
        rt.dispatcher.schedule("write", job_id, next_eta)


def _plan_json(plan: Any) -> dict[str, Any]:
    if plan is None:
        return {
            "creates": [],
            "updates": [],
            "deletes": [],
            "notes": ["agentic writer: no actions"],
        }
    return {
        "creates": plan.creates,
        "updates": plan.updates,
        "deletes": plan.deletes,
        "notes": plan.notes,
    }


# --- add -------------------------------------------------------------------------------


def run_add(rt: Runtime, job_id: str) -> None:
    """Write notes and sidecars, verify them, then commit provenance and chunk hashes."""
    s = rt.settings
    worker = rt.who()
    with session_scope(rt.db) as session:
        job = claim(session, job_id, "add", worker=worker, lease_sec=s.lease_sec)
        if job is None:
            return
        plan = dict(job.actions or {})
        source, session_id, signal_hash = job.transcript_path, job.session_id, job.signal_hash
        chunk_hashes = list(job.chunk_hashes or [])

    failpoint("after_claim:add")
    now_iso = utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
    written: list[Any] = []
    twins: list[tuple[dict[str, Any], str, float]] = []
    creates = []
    for learning in plan.get("creates", []):
        twin = semantic.find_twin(s.kb_path, learning, s.dedup_threshold)
        own_id = kb.learning_id(str(learning.get("title", "")), str(learning.get("rule", "")))
        if twin is not None and twin[0] != own_id:
            twins.append((learning, twin[0], twin[1]))  # a near-duplicate: proof, not a note
        else:
            creates.append(learning)
    try:
        for learning in creates:
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
                    ),
                )
            )
    except (OSError, kb.NoteError) as exc:
        # Disk full, permissions, a note that does not parse back: nothing is committed,
        # the paid answer stays on the job, and the add stage retries with backoff.
        with owned(rt, job_id, worker) as (session, job):
            if job is None:
                return
            add_failures = int((job.result or {}).get("add_failures", 0)) + 1
            job.result = {**(job.result or {}), "add_failures": add_failures}
            job.error = f"add failed: {type(exc).__name__}: {exc}"
            control.record_error(
                session, kind="add_failed", message=job.error, context={"job_id": job_id}
            )
            if add_failures >= s.max_retries:
                finish(
                    session,
                    job,
                    outcome="poison_add_failed",
                    state="poisoned",
                    detail=job.error,
                    worker=worker,
                )
                return
            until = utcnow() + _backoff(rt, add_failures)
            transition(
                session,
                job,
                to_state="retrying",
                detail=job.error,
                next_run_at=until,
                worker=worker,
            )
            _log_transition(job)
        rt.dispatcher.schedule("add", job_id, until)
        return

    failpoint("after_notes")
    notes_touched = 0
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        created = updated = deleted = 0
        for learning, note in written:
            res = learnings.upsert_learning(
                session,
                learning_id=note.id,
                title=str(learning.get("title", "")),
                category=str(learning.get("category") or "Unknown"),
                learning_type=str(learning.get("learning_type") or "bug-fix"),
                confidence_num=float(learning.get("confidence_num") or 0.6),
                note_path=str(note.path),
                content_hash=note.content_hash,
                source=source,
                session_id=session_id,
                signal_hash=signal_hash,
                job_id=job_id,
            )
            created += int(res.created)
            updated += int(not res.created)
        for learning, twin_id, score in twins:
            title = str(learning.get("title", ""))[:80]
            reason = f"semantic twin (cosine {score:.3f}) of CREATE {title!r}"
            updated += _prove(session, twin_id, source, reason, job_id, now_iso)
        for upd in plan.get("updates", []):
            lid = str(upd.get("target_id", ""))
            updated += _prove(session, lid, source, upd.get("reason"), job_id, now_iso)
        for dele in plan.get("deletes", []):
            lid = dele.get("target_id", "")
            reason = str(dele.get("reason") or "retired by belief revision")
            if learnings.retire(session, lid, reason=reason, job_id=job_id):
                deleted += 1
                row = session.get(learnings.Learning, lid)
                if row is not None and row.note_path and os.path.exists(row.note_path):
                    kb.retire_note(
                        Path(row.note_path), status="retired", reason=reason, now=now_iso
                    )
        learnings.record_chunks(session, chunk_hashes, transcript_path=source, job_id=job_id)
        failpoint("before_commit:add")
        notes_touched = created + updated + deleted
        summary = f"created={created} updated={updated} deleted={deleted}"
        notes = plan.get("notes") or []
        if notes:
            summary += " notes: " + "; ".join(str(n) for n in notes)[:800]
        outcome = job.outcome if job.outcome and job.outcome != "ok" else "ok"
        finish(session, job, outcome=outcome, detail=summary, worker=worker)
    if notes_touched and not s.skip_reindex:
        rt.dispatcher.kb_changed()


def _prove(
    session: Session, learning_id: str, source: str, reason: str | None, job_id: str, now_iso: str
) -> bool:
    """UPDATE (or a semantic twin): +1 proof from ``source`` in the ledger and the note."""
    if not learnings.add_proof(session, learning_id, source, reason=reason, job_id=job_id):
        return False
    row = session.get(learnings.Learning, learning_id)
    if row is not None and row.note_path and os.path.exists(row.note_path):
        kb.bump_note(Path(row.note_path), source=source, proof_count=row.proof_count, now=now_iso)
    return True
