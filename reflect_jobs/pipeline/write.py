"""The write stage: the only paid step — gates, one model call, the outcome as a job state.

The answer is secret-redacted as it returns and recorded (with its cost and quota telemetry)
*before* it is parsed, so a crash after the call reuses the recorded answer instead of paying
again, and no credential the model echoes is ever stored. What an outcome does to
the job — the error-ledger kind, the target state, the backoff, the halt flag, the next
message — is data in ``writer/outcomes.py`` (``ERROR_KINDS``, ``job_move``); this module
only applies it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reflect_jobs.faults import failpoint
from reflect_jobs.ledger import control, costs
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import claim, transition
from reflect_jobs.ledger.models import Job, utcnow
from reflect_jobs.limits import Deferral
from reflect_jobs.writer.actions import (
    ActionPlan,
    UnparseableOutput,
    parse_actions,
    plan_actions,
    strip_fence,
)
from reflect_jobs.writer.api_backends import writer_options
from reflect_jobs.writer.backends import make_backend
from reflect_jobs.writer.evidence import sent_slice
from reflect_jobs.writer.items import answer_object, plan_items
from reflect_jobs.writer.outcomes import (
    AttemptContext,
    AttemptOutcome,
    backend_missing_outcome,
    classify_attempt,
    error_kind,
    job_move,
)
from reflect_jobs.writer.prompt import build_prompt
from reflect_jobs.writer.quota import bucket_of, extract_rate_limits, quota_gate
from reflect_jobs.writer.result import BackendMissing, ModelResult

from .runtime import Runtime, apply_move, defer, log, log_transition, owned


@dataclass
class WriteTicket:
    """What the write stage took from the ledger when it claimed the job."""

    ctx: AttemptContext
    slice_path: str | None
    related: list[str]
    recorded: ModelResult | None  # an answer paid for before a crash, to reuse
    cost_row_id: int | None
    #: The pass's model (checkpoint, drain or deep; ARCHITECTURE §14.1); "" = REFLECT_DRAIN_MODEL.
    model: str = ""
    #: Who wrote each slice line (``prepare_stats["origins"]``, run-length codes).
    origins: str = ""
    #: The slice exactly as the prompt held it, once read: evidence is checked against it.
    slice_text: str | None = None


def run_write(rt: Runtime, job_id: str) -> None:
    """Gates, one model call (or a recorded answer reused), outcome as a job state.

    The gates run in order, each free: kill switch and dry run (no claim at all), then —
    inside the claim transaction — the write-stage halt, then a missing slice (back to
    prepare), then the **write lease** (a paid call takes one of ``REFLECT_WRITE_CONCURRENCY``
    slots shared by every worker and consumer), and only while holding it the quota gate
    and the caps, which reserve the budget unit right before the call. The slot is given
    back once the answer and its telemetry are recorded, so the next caller's quota gate and
    caps always act on the latest telemetry. Anything that holds the job defers it; nothing
    here fails or charges a job. A recorded answer skips the lease, the quota gate, the
    slice check and the caps: it is already paid.

    Args:
        rt: The runtime.
        job_id: The job to write (a no-op unless it is due at stage ``write``).
    """
    s = rt.settings
    worker = rt.who()
    if s.disabled:
        return
    if s.dry_run:
        # Read-only by contract (SPEC-drain §5.10 as documented for 5.2.5): no claim, no call,
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
        if ticket.ctx.expect_actions and not _read_slice(ticket):
            # Its evidence is checked against the slice that was sent: rebuild the slice
            # (free); the recorded answer stays pending and is reused then.
            _back_to_prepare(rt, job_id, worker)
            return
    else:
        if not ticket.slice_path or not os.path.exists(ticket.slice_path):
            _back_to_prepare(rt, job_id, worker)
            return
        backend_name = s.resolved_writer_backend()
        # The heuristic writer calls no model: it costs nothing, so it takes no slot and no
        # budget unit.
        paid = backend_name != "heuristic"
        slot = None
        if paid and rt.write_lease is not None:
            slot = rt.write_lease.acquire(_lease_wait(rt))
            if slot is None:
                _lease_busy(rt, job_id, worker)
                return
            failpoint("write:holding_lease")
        try:
            if _quota_held(rt, job_id, worker):
                return
            booked = rt.caps.reserve() if paid else None
            if isinstance(booked, Deferral):
                with owned(rt, job_id, worker) as (session, job):
                    if job is not None:
                        defer(session, job, booked.until, booked.reason, worker)
                rt.dispatcher.schedule("write", job_id, booked.until)
                return
            reservation = booked
            try:
                result, missing = _call_model(rt, job_id, backend_name, ticket)
            except BaseException:  # nothing was paid (the slice did not read): give it back
                if reservation is not None:
                    rt.caps.refund(reservation)
                raise
            if result is not None:
                ticket.cost_row_id = _record_answer(rt, job_id, result)
        finally:
            if slot is not None:
                slot.release()  # the answer and its telemetry are recorded: next caller
        if result is not None:
            failpoint("after_record")
    outcome, plan = decide(result, missing, ticket)
    if outcome.entries == 0 and reservation is not None:
        rt.caps.refund(reservation)
    _record_outcome(rt, job_id, worker, ticket, result, outcome, plan)


#: The longest a worker waits for a write slot before it defers the job (which is due again
#: at once, so the worker thread is free for other stages meanwhile).
LEASE_WAIT_SEC = 10.0


def _lease_wait(rt: Runtime) -> float:
    """How long to wait for a slot: :data:`LEASE_WAIT_SEC`, at most half the job's lease."""
    return min(LEASE_WAIT_SEC, rt.settings.lease_sec / 2)


def _lease_busy(rt: Runtime, job_id: str, worker: str) -> None:
    """Every write slot is taken: defer the job, due again now (free; not a failure)."""
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        slots = rt.write_lease.slots if rt.write_lease is not None else 0
        defer(session, job, utcnow(), f"write lease busy: {slots} paid call(s) in flight", worker)
    rt.dispatcher.schedule("write", job_id)


def _quota_held(rt: Runtime, job_id: str, worker: str) -> bool:
    """The quota gate on the latest telemetry, and a fresh job lease for the call.

    Runs after the write slot is held, so every answer recorded before this one has
    already stored its telemetry. Also renews the job's lease: the wait for the slot must
    not eat into the time the call has.

    Returns:
        True when the job must not be called now: the gate is closed (the job is deferred)
        or our lease on it was lost; False to go on.
    """
    s = rt.settings
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return True
        job.lease_expires_at = utcnow() + timedelta(seconds=s.lease_sec)
        if not s.quota_gate:
            return False
        decision = quota_gate(
            control.quota_snapshots(session),
            now=time.time(),
            ttl_sec=s.quota_ttl_sec,
            util_threshold=s.quota_util_threshold,
            api_key_auth=s.api_key_auth,
        )
        if decision.open:
            return False
        until = utcnow() + timedelta(seconds=min(s.quota_ttl_sec, 900))
        if decision.until is not None:  # the provider said when the window resets
            until = min(until, datetime.fromtimestamp(decision.until, UTC))
        defer(session, job, until, f"quota gate closed: {decision.reason}", worker)
        control.record_error(
            session, kind="drain_quota_deferred", severity="warn", message=decision.reason
        )
    rt.dispatcher.schedule("write", job_id, until)
    return True


def _claim_for_write(rt: Runtime, job_id: str, worker: str) -> WriteTicket | None:
    """Claim the job and apply the halt gate in the same transaction."""
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
            log_transition(job)
            return None
        pending = costs.pending_attempt(session, job_id)
        recorded = (
            ModelResult.from_json(pending.raw_answer).redacted()  # rows from before redaction
            if pending and pending.raw_answer
            else None
        )
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
        stats = job.prepare_stats or {}
        pass_info = stats.get("pass") or {}
        return WriteTicket(
            ctx,
            job.slice_path,
            list(job.related_ids or []),
            recorded,
            pending.id if pending else None,
            str(pass_info.get("model") or "") if isinstance(pass_info, dict) else "",
            origins=str(stats.get("origins") or ""),
        )


def _read_slice(ticket: WriteTicket) -> bool:
    """Read the job's slice onto the ticket; False when it is gone (deleted, disk cleaned)."""
    if ticket.slice_text is not None:
        return True
    if not ticket.slice_path:
        return False
    try:
        ticket.slice_text = Path(ticket.slice_path).read_text(encoding="utf-8")
    except OSError:
        return False
    return True


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
    rt: Runtime, job_id: str, backend_name: str, ticket: WriteTicket
) -> tuple[ModelResult | None, str | None]:
    """The one paid call. Returns (answer, None) or (None, why the backend is missing)."""
    s = rt.settings
    assert ticket.slice_path is not None
    ticket.slice_text = Path(ticket.slice_path).read_text(encoding="utf-8")
    prompt = build_prompt(ticket.slice_text, allowed_ids=ticket.related)
    try:
        backend = make_backend(
            backend_name,
            claude_bin=s.claude_bin,
            model=ticket.model or s.model,
            cwd=str(s.writer_cwd),
            drain_timeout=s.timeout_sec,
            writer_mode=s.writer_mode,
            max_turns=s.max_turns,
            options=writer_options(s),
        )
        log.info(
            "model call",
            job_id=job_id,
            backend=backend_name,
            model=ticket.model or s.model,
            prompt_chars=len(prompt),
        )
        # Redact before anything records or parses it: a secret the model echoes must not
        # reach the ledger, a note, its file name or a later prompt (ARCHITECTURE §5).
        return backend.call(prompt).redacted(), None
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


def decide(
    result: ModelResult | None, missing: str | None, ticket: WriteTicket
) -> tuple[AttemptOutcome, ActionPlan | None]:
    """Score the attempt (SPEC-drain §5.6 via ``classify_attempt``) and plan its actions.

    Args:
        result: The model's answer, or None when the backend is missing.
        missing: Why the backend is missing (when ``result`` is None).
        ticket: The claim's context (failure history, the ids revisions may target).

    Returns:
        The outcome and, for an ``ok`` extract-mode answer, its safe action plan.
    """
    if result is None:
        return backend_missing_outcome(missing or "backend missing"), None
    outcome = classify_attempt(result, ticket.ctx)
    plan = None
    if outcome.disposition == "ok" and ticket.ctx.expect_actions:
        try:
            # Evidence or nothing (ARCHITECTURE §6): each CREATE's quote must occur in the
            # slice this very prompt held.
            sent = sent_slice(ticket.slice_text or "", ticket.origins)
            plan = plan_actions(
                parse_actions(result.text), allowed_ids=set(ticket.related), sent=sent
            )
            plan.items = plan_items(answer_object(_unfenced(result.text)))
            plan.writer = result.backend
        except UnparseableOutput:  # classify_attempt already checks; keep the guard
            outcome = AttemptOutcome("fail_unparseable", 1, "retry", "prose", "unparseable actions")
    if result.backend == "heuristic" and outcome.entries:
        outcome = dataclasses.replace(outcome, entries=0)
    return outcome, plan


def _record_outcome(
    rt: Runtime,
    job_id: str,
    worker: str,
    ticket: WriteTicket,
    result: ModelResult | None,
    outcome: AttemptOutcome,
    plan: ActionPlan | None,
) -> None:
    """Charge (or not), log errors, and move the job to the state its outcome maps to."""
    move = job_move(outcome.disposition)
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
        message = f"{outcome.outcome}: {outcome.detail}"
        kind = error_kind(outcome.outcome)
        if kind:
            control.record_error(
                session, kind=kind[0], severity=kind[1], message=message, context=context
            )
        if move.stage == "add":  # the paid answer goes on to the add stage
            job.result = {"outcome": outcome.outcome, "detail": outcome.detail}
            job.actions = plan_json(plan)
        else:
            job.error = outcome.detail
        if move.counts_failure:
            job.failures += 1
            if result is not None and result.timed_out:
                job.timeouts += 1
            control.record_error(
                session,
                kind="drain_write_failed",
                severity="warn",
                message=message,
                context=context,
            )
        if move.sets_halt:
            control.set_flag(session, control.HALT_KEY, message[:500])
        apply_move(
            rt,
            session,
            job,
            move,
            outcome=outcome.outcome,
            detail=outcome.detail,
            worker=worker,
            retry_after_sec=result.retry_after_sec if result is not None else 0.0,
        )
        next_eta = job.next_run_at
    if move.dispatch == "add":
        rt.dispatcher.schedule("add", job_id)
    elif move.dispatch == "write":
        rt.dispatcher.schedule("write", job_id, next_eta)


def plan_json(plan: ActionPlan | None) -> dict[str, Any]:
    """The action plan as stored on the job for the add stage.

    Args:
        plan: The safe plan, or None for the agentic writer (which edits the KB itself).

    Returns:
        ``{"creates", "updates", "deletes", "notes"}``, plus ``"items"`` (the reflection
        store's ``update``/``new``/``summary`` plan) when the answer was parsed.
    """
    if plan is None:
        return {
            "creates": [],
            "updates": [],
            "deletes": [],
            "notes": ["agentic writer: no actions"],
        }
    out: dict[str, Any] = {
        "creates": plan.creates,
        "updates": plan.updates,
        "deletes": plan.deletes,
        "notes": plan.notes,
        # CREATEs whose evidence was missing or not in the slice (ARCHITECTURE §6)
        "dropped_unevidenced": plan.dropped_unevidenced,
        # which writer answered: the heuristic writer's learnings wait for review (§7.1)
        "writer": plan.writer,
    }
    if plan.items is not None:  # the reflector's part: applied by the add stage
        out["items"] = plan.items
    return out


def _unfenced(text: Any) -> Any:
    """The answer text without a markdown fence (as :func:`parse_actions` reads it)."""
    return strip_fence(text.strip()) if isinstance(text, str) else text
