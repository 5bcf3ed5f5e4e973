"""Cost rows: what every attempt spent, recorded before anyone parses the answer.

The row of a paid attempt is committed with the raw answer as soon as the model call
returns (``outcome='pending'``). If the worker dies before the answer is applied, the
retried write stage finds the pending row and reuses the answer instead of paying again
(ARCHITECTURE §5, §11). Free outcomes (skips, quarantine, halts) get rows with ``entries=0`` so
the report shows every run.

A paid call is written down *before* it starts (``outcome='calling'``, one budget entry): a
call cut short — the consumer stopped, the worker killed — may still have billed, so its row
is settled as ``interrupted`` (the entry stays charged) by whoever takes the job back. There
is never a started model call without a cost row.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, cast

from sqlalchemy import Connection, Table, insert, select, update
from sqlalchemy.orm import Session

from reflect_jobs.redaction import redact_structured
from reflect_jobs.writer.prices import BUILTIN_PRICES as PRICES  # noqa: F401  (kept for callers)
from reflect_jobs.writer.prices import cost_usd

from .db import rows_affected
from .gateway import JobRow
from .models import CostRow, Job, utcnow

if TYPE_CHECKING:
    from reflect_jobs.writer.result import ModelResult


def estimate_cost(
    model: str, inp: int, out: int, cache_read: int, cache_write: int, backend: str = ""
) -> float:
    """Price tokens from the price table (``writer.prices``, extended by ``REFLECT_PRICES``).

    Used only when the writer reported no cost of its own. An unknown model is priced as
    sonnet for the Claude backends and costs $0 for the others (a local model is free).

    Args:
        model: The model's name (``claude-opus-4…`` matches ``opus``); case is ignored.
        inp: Input tokens.
        out: Output tokens.
        cache_read: Cache-read input tokens.
        cache_write: Cache-creation input tokens.
        backend: The row's writer backend (``""`` = unknown, priced like Claude).

    Returns:
        The estimated cost in USD.
    """
    usage = {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }
    return cost_usd(model, backend or "", usage)


#: The most characters of a model answer the ledger keeps (text + raw stdout + stderr). A
#: real answer is far below it (the CLI's output limit is some 100k tokens); a hostile or
#: runaway one (a 5 MB title) would otherwise be stored twice over, as text and as stdout.
RAW_ANSWER_MAX_CHARS = 1_000_000


def bounded_answer(result: ModelResult) -> str:
    """The answer as stored in ``raw_answer``: :meth:`ModelResult.to_json`, bounded.

    Within :data:`RAW_ANSWER_MAX_CHARS` it is the lossless JSON. Beyond it ``text`` and
    ``raw_stdout`` keep their first half of the bound each and ``stderr`` 64 KiB, and the
    JSON gains ``"truncated_from_chars"`` (ignored by ``from_json``). The telemetry, usage
    and cost fields are kept whole; a crash-reuse of a cut answer parses only what was
    kept (an oversized answer is not a usable one anyway).

    Args:
        result: The :class:`reflect_jobs.writer.result.ModelResult`.

    Returns:
        The JSON to store.
    """
    raw = result.to_json()
    if len(raw) <= RAW_ANSWER_MAX_CHARS:
        return raw
    half = RAW_ANSWER_MAX_CHARS // 2 - 65_536
    cut = dataclasses.replace(
        result,
        text=result.text[:half],
        raw_stdout=result.raw_stdout[:half],
        stderr=result.stderr[:65_536],
    )
    return cut.to_json()[:-1] + f', "truncated_from_chars": {len(raw)}}}'


def _answer_row(
    result: ModelResult, *, job_id: str | None, transcript: str, outcome: str, entries: int
) -> CostRow:
    """A cost row carrying a model answer's usage, price and (redacted, bounded) answer."""
    usage = result.usage
    now = utcnow()
    return CostRow(
        job_id=job_id,
        at=now,
        day=now.strftime("%Y-%m-%d"),
        transcript=transcript,
        outcome=outcome,
        entries=entries,
        backend=result.backend,
        model=result.model,
        turns=result.num_turns,
        tokens=result.tokens,
        input=usage.get("input_tokens", 0),
        output=usage.get("output_tokens", 0),
        cache_read=usage.get("cache_read_input_tokens", 0),
        cache_creation=usage.get("cache_creation_input_tokens", 0),
        cost_usd=float(result.cost_usd or 0.0),
        exit_code=result.exit_code,
        # Callers hand us a redacted result; redacting the JSON again here makes "no
        # unredacted answer is ever recorded" hold for every caller (it is idempotent).
        raw_answer=redact_structured(bounded_answer(result))[0],
    )


def record_attempt(
    session: Session, job: Job, result: ModelResult, *, started: CostRow | None = None
) -> CostRow:
    """Commit-worthy row for a model answer (a ``ModelResult``), outcome still pending.

    Args:
        session: An open ledger session; the row is added to it, and committing that
            session is what makes the answer survive a crash.
        job: The job the call was made for.
        result: The :class:`reflect_jobs.writer.result.ModelResult`; its usage, cost and
            the answer as JSON (``raw_answer``, secret-redacted and :func:`bounded_answer`) are stored.
        started: The call's :func:`record_started` row, filled in instead of adding one.

    Returns:
        The row: ``outcome='pending'``, ``entries=1``, ``consumed=False``.
    """
    row = _answer_row(
        result, job_id=job.id, transcript=job.transcript_path, outcome="pending", entries=1
    )
    row.consumed = False
    if started is None:
        session.add(row)
        return row
    _fill(started, row)
    return started


def _fill(started: CostRow, row: CostRow) -> None:
    """Copy an answer's row onto the ``calling`` row written before the call started."""
    for column in CostRow.__table__.columns:
        value = getattr(row, column.key)
        if column.key not in ("id", "at", "day") and value is not None:
            setattr(started, column.key, value)


#: The outcome of a paid call's row while the call runs, and of one that never answered.
CALLING, INTERRUPTED = "calling", "interrupted"


def record_started(
    session: Session, job: Job | None, *, backend: str, model: str, label: str = ""
) -> CostRow:
    """Add the row of a paid call about to start: charged (one entry) until it answers.

    Args:
        session: An open ledger session; commit it before the call starts.
        job: The job the call is made for; ``None`` for a jobless pass (the dedupe pass),
            whose row is charged to its own units (``entries=0``) and named by ``label``.
        backend: The writer backend.
        model: The model asked for.
        label: A jobless pass's ``transcript`` label (``dedupe:<repo key>``).

    Returns:
        The new row: ``outcome='calling'``, ``consumed=False``. The answer fills it
        (:func:`record_attempt` / :func:`record_jobless_attempt` with ``started=``); a call
        that never answers is settled by :func:`settle_interrupted` (a job's) or
        :func:`settle_abandoned_jobless` (a jobless pass's, by recovery).
    """
    now = utcnow()
    row = CostRow(
        job_id=job.id if job is not None else None,
        at=now,
        day=now.strftime("%Y-%m-%d"),
        transcript=job.transcript_path if job is not None else label,
        outcome=CALLING,
        entries=1 if job is not None else 0,
        backend=backend[:32],
        model=model[:64],
        consumed=False,
    )
    session.add(row)
    return row


def settle_row_interrupted(session: Session, row_id: int) -> None:
    """Mark one ``calling`` row ``interrupted`` (the call was cut short in this process).

    Args:
        session: An open ledger session.
        row_id: The row :func:`record_started` added.
    """
    session.execute(
        update(CostRow)
        .where(CostRow.id == row_id, CostRow.outcome == CALLING)
        .values(outcome=INTERRUPTED, consumed=True)
        .execution_options(synchronize_session=False)
    )


def settle_abandoned_jobless(session: Session, before: datetime) -> int:
    """Settle jobless passes' ``calling`` rows started before ``before`` as ``interrupted``.

    A jobless pass (the dedupe pass) has no job for recovery to take back, so a worker
    killed inside its call would leave the row ``calling`` for ever; recovery settles it
    once the call can no longer be running (older than the model-call timeout).

    Args:
        session: An open ledger session.
        before: Rows started before this are abandoned.

    Returns:
        How many rows were settled.
    """
    matched = rows_affected(
        session,
        update(CostRow)
        .where(CostRow.job_id.is_(None), CostRow.outcome == CALLING, CostRow.at < before)
        .values(outcome=INTERRUPTED, consumed=True)
        .execution_options(synchronize_session=False),
    )
    return matched or 0


def settle_interrupted(session: Session, job_ids: list[str]) -> int:
    """Mark the jobs' calls that never answered as ``interrupted``: charged, never reused.

    Called by whoever takes a job back (recovery, a stopping consumer's hand-back) and by
    the write stage when its call is cut short. The entry stays counted: the provider may
    have billed the call, so the budget treats it as spent.

    Args:
        session: An open ledger session.
        job_ids: The jobs whose ``calling`` rows to settle.

    Returns:
        How many rows were settled.
    """
    if not job_ids:
        return 0
    matched = rows_affected(
        session,
        update(CostRow)
        .where(CostRow.job_id.in_(job_ids), CostRow.outcome == CALLING)
        .values(outcome=INTERRUPTED, consumed=True)
        .execution_options(synchronize_session=False),
    )
    return matched or 0


def record_jobless_attempt(
    session: Session,
    result: ModelResult,
    *,
    label: str,
    outcome: str = "pending",
    started: CostRow | None = None,
) -> CostRow:
    """Add the row of a paid call made for no job (the Reflection Store's dedupe pass).

    The row is what ``reflect-jobs cost`` reports, so the spend shows with the writer's
    (``--by outcome`` tells them apart). ``entries`` is 0: the writer's daily budget (which
    ``status`` also reads from the ledger's ``entries``) is not what such a call spends;
    it counts against its own units in Huey's storage.

    Args:
        session: An open ledger session; the row is added to it.
        result: The :class:`reflect_jobs.writer.result.ModelResult` (redacted again here).
        label: What the call was for, stored as the row's ``transcript`` (e.g.
            ``dedupe:<repo key>``: ``cost --by transcript`` groups by it, and
            :func:`pending_attempt` finds an unsettled answer by it).
        outcome: ``pending`` (the default: recorded before it is parsed, settled by
            :func:`settle_attempt`) or the final outcome word, e.g. ``dedupe_ok``.
        started: The call's :func:`record_started` row, filled in instead of adding one.

    Returns:
        The row: ``job_id`` NULL, ``entries=0``, consumed unless still ``pending``.
    """
    row = _answer_row(result, job_id=None, transcript=label, outcome=outcome[:64], entries=0)
    row.consumed = outcome != "pending"
    if started is None:
        session.add(row)
        return row
    _fill(started, row)
    return started


def settle_attempt(session: Session, row_id: int, *, outcome: str) -> None:
    """Give a recorded answer its outcome; it is no longer pending (never reused again).

    Args:
        session: An open ledger session.
        row_id: The row :func:`record_attempt` or :func:`record_jobless_attempt` added.
        outcome: The outcome word (cut to 64 characters).
    """
    row = session.get(CostRow, row_id)
    if row is not None:
        row.outcome = outcome[:64]
        row.consumed = True


def pending_attempt(session: Session, job_id: str | None, *, label: str = "") -> CostRow | None:
    """An answer that was paid for and recorded but never applied (crash after the call).

    Args:
        session: An open ledger session.
        job_id: The job whose write stage is running again; ``None`` for a pass made for
            no job, found by ``label``.
        label: A jobless pass's row label (``dedupe:<repo key>``).

    Returns:
        The newest unconsumed ``pending`` row of that job (or label), or ``None``.
    """
    query = select(CostRow).where(CostRow.consumed.is_(False), CostRow.outcome == "pending")
    if job_id is not None:
        query = query.where(CostRow.job_id == job_id)
    elif label:
        query = query.where(CostRow.job_id.is_(None), CostRow.transcript == label)
    else:
        return None
    return session.scalars(query.order_by(CostRow.id.desc())).first()


def record_free(
    session: Session | Connection,
    job: Job | JobRow | None,
    outcome: str,
    *,
    model: str = "",
    backend: str = "",
) -> None:
    """Add the row of an outcome that cost nothing, so the report shows every run.

    One Core ``INSERT`` (no ORM object): a $0 job writes one of these on the hot path.

    Args:
        session: An open ledger session, or a gateway transaction's connection.
        job: The job, or ``None`` for an outcome not tied to one.
        outcome: The outcome word (e.g. ``skip_dup_signal_hash``, ``quarantine_oversized``).
        model: The model that would have been called, if known.
        backend: The writer backend, if known.
    """
    now = utcnow()
    session.execute(
        _INSERT_COST,
        {
            "job_id": job.id if job else None,
            "at": now,
            "day": now.strftime("%Y-%m-%d"),
            "transcript": job.transcript_path if job else "",
            "outcome": outcome,
            "entries": 0,
            "model": model,
            "backend": backend,
            "consumed": True,
        },
    )


_INSERT_COST = insert(cast(Table, CostRow.__table__))


def budget_used(session: Session, day: str) -> int:
    """Σ entries for a UTC day, from the ledger (the authoritative view for reports).

    Args:
        session: An open ledger session.
        day: The UTC day as ``YYYY-MM-DD``.

    Returns:
        The number of entries (paid attempts) recorded that day.
    """
    rows = session.scalars(select(CostRow.entries).where(CostRow.day == day)).all()
    return int(sum(rows))


def spent_now(session: Session, window_sec: int, now: datetime | None = None) -> tuple[int, int]:
    """Budget entries spent today (UTC) and in the current run window, from the cost rows.

    What the caps' counters would hold had they not been lost (a queue file rebuilt):
    :meth:`reflect_jobs.limits.Caps.seed` puts them back from this.

    Args:
        session: An open ledger session.
        window_sec: The run window's length (0: no run window; its count is 0).
        now: The current time (default now).

    Returns:
        ``(entries today, entries in the current epoch-aligned run window)``.
    """
    now = now or utcnow()
    day = budget_used(session, now.strftime("%Y-%m-%d"))
    if window_sec <= 0:
        return day, 0
    start = int(now.timestamp() // window_sec) * window_sec
    since = datetime.fromtimestamp(start, now.tzinfo)
    rows = session.scalars(select(CostRow.entries).where(CostRow.at >= since)).all()
    return day, int(sum(rows))
