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
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from reflect_jobs.gates import Check, Defer, FreeGate, Gate, Go
from reflect_jobs.ledger import control, costs, gateway
from reflect_jobs.ledger.control import HaltGate
from reflect_jobs.ledger.gateway import JobRow
from reflect_jobs.ledger.jobs import transition
from reflect_jobs.ledger.models import CostRow, utcnow
from reflect_jobs.limits import CapsGate
from reflect_jobs.write_lease import LEASE_WAIT_SEC, LeaseGate
from reflect_jobs.writer.actions import (
    ActionPlan,
    UnparseableOutput,
    parse_actions,
    plan_actions,
    strip_fence,
)
from reflect_jobs.writer.evidence import sent_slice
from reflect_jobs.writer.items import answer_object, evidenced, plan_items
from reflect_jobs.writer.outcomes import (
    AttemptContext,
    AttemptOutcome,
    backend_missing_outcome,
    classify_attempt,
    error_kind,
    job_move,
)
from reflect_jobs.writer.prompt import build_prompt
from reflect_jobs.writer.quota import QuotaGate
from reflect_jobs.writer.result import ModelResult

from . import paid_call
from .middleware import Held, Stage, StageRun, run_stage
from .runtime import Runtime, apply_move, defer, log, log_transition, owned


@dataclass
class WriteTicket:
    """What the write stage took from the ledger when it claimed the job."""

    ctx: AttemptContext
    slice_path: str | None
    related: list[str]
    #: The pass's model (checkpoint, drain or deep; ARCHITECTURE §14.1); "" = REFLECT_DRAIN_MODEL.
    model: str = ""
    #: The cost row holding the answer (set once it is recorded or reused).
    cost_row_id: int | None = None
    #: Who wrote each slice line (``prepare_stats["origins"]``, run-length codes).
    origins: str = ""
    #: The slice exactly as the prompt held it, once read: evidence is checked against it.
    slice_text: str | None = None


def run_write(rt: Runtime, job_id: str) -> None:
    """Gates, one model call (or a recorded answer reused), outcome as a job state.

    Through the stage chain (``middleware.run_stage``: stage errors, kill switch, dry
    run, claim), then the paid path in :data:`reflect_jobs.gates.PAID_PATH` order, each
    gate free: the write-stage halt (in the claim's transaction), a recorded answer
    (reused: the rest is skipped, it is already paid), the slice file (missing: back to
    prepare), the **write lease** (a paid call takes one of ``REFLECT_WRITE_CONCURRENCY``
    slots shared by every worker and consumer), our lease on the job (renewed for the
    call), and only while holding the slot the quota gate and the caps, which reserve
    the budget unit right before the call (``pipeline/paid_call.py``). The slot is given
    back once the answer and its telemetry are recorded, so the next caller's quota gate
    and caps always act on the latest telemetry. Anything that holds the job defers it;
    nothing here fails or charges a job.

    Args:
        rt: The runtime.
        job_id: The job to write (a no-op unless it is due at stage ``write``).
    """
    run_stage(WRITE, rt, job_id)


def _preview(run: StageRun) -> None:
    """Dry run (read-only by contract, SPEC-drain §5.10 as documented for 5.2.5): no claim,
    no call, no cost row, no budget; the log says what would have run."""
    s = run.rt.settings
    log.info(
        "dry run: would call model",
        job_id=run.job_id,
        backend=s.resolved_writer_backend(),
        model=s.model,
    )


def _claim(run: StageRun, conn: Connection, job: JobRow) -> WriteTicket | Held:
    """Inside the claim's transaction: the halt gate, then what the call needs."""
    s = run.rt.settings
    with gateway.orm(conn) as session:
        halted = HaltGate(session).acquire()
    if isinstance(halted, Defer):
        gateway.transition(conn, job, to_state="halted", detail=halted.reason, worker=run.worker)
        log_transition(job)
        return Held()
    ctx = AttemptContext(
        prior_failures=job.failures,
        prior_timeouts=job.timeouts,
        invalid_streak=job.invalid_streak,
        max_retries=s.max_retries,
        timeout_retries=s.timeout_retries,
        invalid_threshold=s.invalid_threshold,
        token_max=s.token_max,
    )
    stats = job.prepare_stats or {}
    pass_info = stats.get("pass") or {}
    return WriteTicket(
        ctx,
        job.slice_path,
        list(job.related_ids or []),
        str(pass_info.get("model") or "") if isinstance(pass_info, dict) else "",
        origins=str(stats.get("origins") or ""),
    )


def _write(run: StageRun) -> None:
    """The paid call (or the recorded answer), then the outcome as the job's move."""
    rt, job_id, worker, ticket = run.rt, run.job_id, run.worker, run.ticket
    s = rt.settings
    backend_name = s.resolved_writer_backend()
    spec = paid_call.PaidPass(
        kind="write", backend=backend_name, model=ticket.model or s.model, job_id=job_id
    )
    answer = paid_call.call(s, spec, _gates(rt, run, backend_name), lambda: _prompt(ticket))
    if isinstance(answer, Defer):
        _held(rt, job_id, worker, answer)
        return
    if answer.reused and ticket.ctx.expect_actions and not _read_slice(ticket):
        # Its evidence is checked against the slice that was sent: rebuild the slice
        # (free); the recorded answer stays pending and is reused then.
        _back_to_prepare(rt, job_id, worker)
        return
    ticket.cost_row_id = answer.row_id
    outcome, plan = decide(answer.result, answer.missing, ticket)
    answer.settle(outcome.entries)
    _record_outcome(rt, job_id, worker, ticket, answer.result, outcome, plan)


WRITE = Stage("write", claim=_claim, step=_write, preview=_preview)


def _gates(rt: Runtime, run: StageRun, backend_name: str) -> list[Gate]:
    """The write stage's gates on the paid path (asked in ``PAID_PATH`` order).

    The heuristic writer calls no model: it costs nothing, so it takes no slot and no
    budget unit (the quota gate still applies, as it always did).
    """
    s = rt.settings
    path = run.ticket.slice_path
    gates: list[Gate] = [
        Check("slice", lambda: None if path and os.path.exists(path) else _NO_SLICE),
        JobLease(rt, run.job_id, run.worker),
        QuotaGate.from_settings(s, paid_call.snapshots(s.db_url)),
    ]
    if backend_name != "heuristic":
        gates.append(CapsGate(rt.caps))
        if rt.write_lease is not None:
            gates.append(LeaseGate(rt.write_lease, _lease_wait(rt)))
    return gates


_NO_SLICE = Defer("slice", "slice file missing; preparing again")


class JobLease(FreeGate):
    """Our claim on the job still holds: renewed for the call (the wait for a write slot
    must not eat into the time the call has); lost, the call is not made.

    Args:
        rt: The runtime (the lease length).
        job_id: The job we claimed.
        worker: The lease owner we claimed it as.
    """

    name = "job_lease"

    def __init__(self, rt: Runtime, job_id: str, worker: str) -> None:
        """Bind the gate to the job we claimed."""
        self.rt, self.job_id, self.worker = rt, job_id, worker

    def acquire(self) -> Go | Defer:
        """Renew the job's lease, or say it was lost.

        Returns:
            ``Go``, or ``Defer`` with no time (the job is someone else's now).
        """
        with owned(self.rt, self.job_id, self.worker) as (_session, job):
            if job is None:
                return Defer(self.name, "lease lost")
            job.lease_expires_at = utcnow() + timedelta(seconds=self.rt.settings.lease_sec)
        return Go(self.name)


def _lease_wait(rt: Runtime) -> float:
    """How long to wait for a slot: ``LEASE_WAIT_SEC``, at most half the job's lease."""
    return min(LEASE_WAIT_SEC, rt.settings.lease_sec / 2)


def _held(rt: Runtime, job_id: str, worker: str, held: Defer) -> None:
    """A gate held the job: back to prepare (no slice), nothing (lease lost), or deferred
    until the gate's time (free; not a failure), reported when the gate says so."""
    if held.gate == "slice":
        _back_to_prepare(rt, job_id, worker)
        return
    if held.gate == "job_lease" or held.until is None:
        return  # our lease was lost (the paid path's one gate without a time): not ours now
    with owned(rt, job_id, worker) as (session, job):
        if job is None:
            return
        defer(session, job, held.until, held.reason, worker)
        if held.error_kind:
            control.record_error(
                session, kind=held.error_kind, severity="warn", message=held.reason
            )
    # Due already (every write slot busy): the message goes now, not through the schedule.
    rt.dispatcher.schedule("write", job_id, held.until if held.until > utcnow() else None)


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
                detail=_NO_SLICE.reason,
                worker=worker,
                next_run_at=utcnow(),
            )
    rt.dispatcher.schedule("prepare", job_id)


def _prompt(ticket: WriteTicket) -> str:
    """The prompt: the static instructions, the revision block and the slice (read now)."""
    assert ticket.slice_path is not None
    ticket.slice_text = Path(ticket.slice_path).read_text(encoding="utf-8")
    return build_prompt(ticket.slice_text, allowed_ids=ticket.related)


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
            # Items too: a close or a new item must quote the session (ARCHITECTURE §14).
            plan.items = evidenced(plan_items(answer_object(_unfenced(result.text))), sent)
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
        row = session.get(CostRow, ticket.cost_row_id) if ticket.cost_row_id else None
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
        if move.counts_failure:  # apply_move counts the failure itself
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
        plan: The safe plan; None stores an empty one.

    Returns:
        ``{"creates", "updates", "deletes", "notes"}``, plus ``"items"`` (the reflection
        store's ``update``/``new``/``summary`` plan) when the answer was parsed.
    """
    if plan is None:
        return {
            "creates": [],
            "updates": [],
            "deletes": [],
            "notes": ["no action plan"],
        }
    out: dict[str, Any] = {
        "creates": plan.creates,
        "updates": plan.updates,
        "deletes": plan.deletes,
        "notes": plan.notes,
        # CREATEs whose evidence was missing or not in the slice (ARCHITECTURE §6)
        "dropped_unevidenced": plan.dropped_unevidenced,
        # CREATE forget_after values dropped (unreadable, past or out of range): the
        # learnings are kept without a TTL (writer/forget_after.py)
        "dropped_forget_after": plan.dropped_forget_after,
        # which writer answered: the heuristic writer's learnings wait for review (§7.1)
        "writer": plan.writer,
    }
    if plan.items is not None:  # the reflector's part: applied by the add stage
        out["items"] = plan.items
    return out


def _unfenced(text: Any) -> Any:
    """The answer text without a markdown fence (as :func:`parse_actions` reads it)."""
    return strip_fence(text.strip()) if isinstance(text, str) else text
