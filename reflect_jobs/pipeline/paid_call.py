"""The one paid-call sequence, shared by every pass that spends money (ARCHITECTURE §2.2, §5).

A recorded answer (paid for before a crash) is reused and nothing else happens. Otherwise:
the pass's gates in :data:`reflect_jobs.gates.PAID_PATH` order — for a paid backend the
write lease, the quota gate on the latest telemetry, then one budget unit — then the one
model call, whose answer is secret-redacted as it returns and recorded in the ledger with
its cost and quota telemetry **before** anything parses it (bounded by
``costs.bounded_answer``), then the write slot goes back. The pass then classifies the
answer and calls :meth:`Answer.settle`, which refunds the unit when the outcome was free.
A deferral charges nothing and holds nothing.

The write stage (``pipeline/write.py``) and the Reflection Store's dedupe pass
(``reflections/dedupe_run.py``) use it; a new paid pass gives its own :class:`PaidPass`
(its kind, model, cost-row label and budget: a ``limits.Caps`` under its own prefix) and
its gates, and inherits the order, the record-before-parse and the reuse.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from reflect_jobs.config import Settings
from reflect_jobs.faults import failpoint
from reflect_jobs.gates import Defer, Gate, Go, Passage, acquire, in_order
from reflect_jobs.ledger import control, costs
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow, Job
from reflect_jobs.writer.api_backends import writer_options
from reflect_jobs.writer.quota import bucket_of, extract_rate_limits
from reflect_jobs.writer.result import BackendMissing, ModelResult
from reflect_jobs.writer.selection import make_backend

log = structlog.get_logger("reflect_jobs.pipeline")

__all__ = ["Answer", "PaidPass", "call", "recorded", "settle_row", "snapshots"]


@dataclass(frozen=True)
class PaidPass:
    """What one paid pass differs in from another.

    Attributes:
        kind: ``write``, ``dedupe``…: the log's ``pass`` and the failpoint
            ``<kind>:holding_lease`` (a write slot held, before the quota gate).
        backend: The resolved writer backend (``Settings.resolved_writer_backend()``).
        model: The model this pass asks.
        job_id: The job the cost row belongs to; ``None`` for a pass made for no job.
        label: A jobless pass's cost-row ``transcript`` (``dedupe:<repo key>``): what
            ``cost --by transcript`` groups it by, and how its recorded answer is found.
        after_record: The failpoint right after the answer is recorded and the slot given
            back (``after_record`` for the write stage).
    """

    kind: str
    backend: str
    model: str
    job_id: str | None = None
    label: str = ""
    after_record: str = "after_record"


@dataclass
class Answer:
    """The call's answer (or why there was none), and what its gates still hold.

    Attributes:
        result: The redacted answer, or ``None`` when the backend is missing.
        missing: Why the backend is missing (``BackendMissing``), else ``None``.
        row_id: The cost row the answer is recorded in (``None`` when there was none).
        reused: The answer was recorded by an earlier attempt (nothing was paid now).
        passage: What the gates took (the budget unit), for :meth:`settle`.
    """

    result: ModelResult | None
    missing: str | None = None
    row_id: int | None = None
    reused: bool = False
    passage: Passage | None = None

    def settle(self, entries: int) -> None:
        """Settle the budget: a free outcome (``entries == 0``) gives its unit back.

        Args:
            entries: The outcome's budget units (``AttemptOutcome.entries``).
        """
        if entries == 0 and self.passage is not None:
            self.passage.refund()


def snapshots(db_url: str) -> Callable[[], dict[str, dict[str, Any]]]:
    """A reader of the latest quota telemetry, for ``writer.quota.QuotaGate``.

    Args:
        db_url: The ledger.

    Returns:
        A function that reads every bucket's latest snapshot in a short read-only session.
    """

    def read() -> dict[str, dict[str, Any]]:
        with session_scope(db_url, readonly=True) as session:
            return control.quota_snapshots(session)

    return read


def recorded(db_url: str, spec: PaidPass) -> Answer | None:
    """An answer this pass paid for and recorded but never settled (a crash after the call).

    Args:
        db_url: The ledger.
        spec: The pass (its job, or its label for a jobless pass).

    Returns:
        The answer to reuse (``reused``), or ``None``.
    """
    with session_scope(db_url, readonly=True) as session:
        row = costs.pending_attempt(session, spec.job_id, label=spec.label)
        if row is None or not row.raw_answer:
            return None
        # .redacted(): rows recorded before answers were redacted as they returned
        return Answer(ModelResult.from_json(row.raw_answer).redacted(), row_id=row.id, reused=True)


def call(
    settings: Settings, spec: PaidPass, gates: Sequence[Gate], prompt: Callable[[], str]
) -> Answer | Defer:
    """Reuse a recorded answer, or pass the gates in order, call once and record the answer.

    Args:
        settings: The settings (the backend's binary, working directory, timeout, options;
            the ledger).
        spec: The pass.
        gates: The pass's gates, in any order: they are asked in
            :data:`~reflect_jobs.gates.PAID_PATH` order. A recorded answer skips them all.
        prompt: Builds the prompt once every gate passed (it may read a file: an error
            there refunds the unit, since nothing was paid).

    Returns:
        The :class:`Answer` (settle it once the outcome is known), or the first gate's
        :class:`~reflect_jobs.gates.Defer` (nothing taken, nothing charged).
    """
    reused = recorded(settings.db_url, spec)
    if reused is not None:
        log.info("reusing recorded answer", job_id=spec.job_id, cost_row=reused.row_id)
        return reused
    passage = acquire(in_order(gates), on_go=lambda go: _holding(spec, go))
    if isinstance(passage, Defer):
        return passage
    answer = Answer(None, passage=passage)
    started: int | None = None
    try:
        try:
            text = prompt()
            if spec.backend != "heuristic":  # written down before it starts: it may bill
                started = _record_started(settings.db_url, spec)
            answer.result = _ask(settings, spec, text)
        except BackendMissing as exc:
            answer.missing = str(exc)
            if started is not None:  # the backend never ran: no call, nothing billed
                _drop_started(settings.db_url, started)
        except BaseException:
            if started is None:  # nothing started, so nothing was paid: give the unit back
                passage.refund()
            else:  # cut short (a stop, a timeout raised): it may have billed, so its row
                _interrupted(settings.db_url, started)  # says so and its unit stays spent
            raise
        if answer.result is not None:
            answer.row_id = record(settings.db_url, spec, answer.result, started=started)
    finally:
        passage.release()  # the answer and its telemetry are recorded: the next caller
    if answer.result is not None:
        failpoint(spec.after_record)
    return answer


def _holding(spec: PaidPass, go: Go) -> None:
    if go.gate == "write_lease":
        failpoint(f"{spec.kind}:holding_lease")


def _ask(settings: Settings, spec: PaidPass, prompt: str) -> ModelResult:
    """The one paid call: one tool-free turn of the configured backend, redacted at once."""
    backend = make_backend(
        spec.backend,
        claude_bin=settings.claude_bin,
        model=spec.model,
        cwd=str(settings.writer_cwd),
        drain_timeout=settings.timeout_sec,
        options=writer_options(settings),
    )
    log.info(
        "model call",
        job_id=spec.job_id,
        backend=spec.backend,
        model=spec.model,
        prompt_chars=len(prompt),
        **({"pass": spec.kind} if spec.kind != "write" else {}),
    )
    # Redact before anything records or parses it: a secret the model echoes must not
    # reach the ledger, a note, its file name or a later prompt (ARCHITECTURE §5).
    return backend.call(prompt).redacted()


def _record_started(db_url: str, spec: PaidPass) -> int:
    """The call's ``calling`` row, committed before the call starts (ARCHITECTURE §5: every
    started call has a cost row; one that never answers ends ``interrupted``)."""
    with session_scope(db_url) as session:
        job = session.get(Job, spec.job_id) if spec.job_id is not None else None
        row = costs.record_started(
            session, job, backend=spec.backend, model=spec.model, label=spec.label
        )
        session.flush()
        return row.id


def _drop_started(db_url: str, row_id: int) -> None:
    with contextlib.suppress(Exception), session_scope(db_url) as session:
        row = session.get(CostRow, row_id)
        if row is not None and row.outcome == costs.CALLING:
            session.delete(row)


def _interrupted(db_url: str, row_id: int) -> None:
    # If this process dies first, recovery settles the row (a job's on reclaim; a jobless
    # pass's once it is older than the call's timeout).
    with contextlib.suppress(Exception), session_scope(db_url) as session:
        costs.settle_row_interrupted(session, row_id)


def record(db_url: str, spec: PaidPass, result: ModelResult, *, started: int | None = None) -> int:
    """Record before parse: the answer, its cost and its quota telemetry, in one commit.

    A job's row counts an attempt on the job; a jobless pass's row carries ``entries=0``
    (its units are its own, not the writer's budget). Both stay ``pending`` until the
    pass settles them, so a crash from here on reuses the answer instead of paying again.

    Args:
        db_url: The ledger.
        spec: The pass.
        result: The redacted answer.
        started: The ``calling`` row written before the call, filled in (else a new row).

    Returns:
        The cost row's id.
    """
    with session_scope(db_url) as session:
        begun = session.get(CostRow, started) if started is not None else None
        if spec.job_id is not None:
            job = session.get(Job, spec.job_id)
            assert job is not None
            row = costs.record_attempt(session, job, result, started=begun)
            job.attempts += 1
        else:
            row = costs.record_jobless_attempt(session, result, label=spec.label, started=begun)
        session.flush()
        snaps = extract_rate_limits(result.raw_stdout, result.stderr) or result.rate_limit_info
        if snaps:
            control.store_quota_snapshots(session, snaps, bucket_of)
        return row.id


def settle_row(db_url: str, row_id: int, outcome: str) -> None:
    """Settle a jobless pass's recorded answer with its outcome (it is no longer reused).

    Args:
        db_url: The ledger.
        row_id: The row :func:`record` returned.
        outcome: The pass's outcome word (``dedupe_ok``…; cut to 64 characters).
    """
    with session_scope(db_url) as session:
        costs.settle_attempt(session, row_id, outcome=outcome)
