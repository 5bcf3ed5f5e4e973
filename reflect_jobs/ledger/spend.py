"""What the cost rows add up to: ``reflect-jobs cost``, ``status``'s last success, ``--since``.

Split from :mod:`.costs`, which writes the rows (before a paid call starts, with the raw
answer before parse) and reads back what the caps need; this module only reads them for
people: the report grouped by day, transcript, model, outcome, writer or backend.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .costs import estimate_cost
from .models import CostRow, utcnow


def parse_since(text: str | None) -> timedelta | None:
    """``30d``, ``24h``, ``2w`` or a bare number of days; None = all time.

    Args:
        text: A number with an optional unit: ``d`` days, ``h`` hours, ``w`` weeks or ``m``
            minutes (no unit means days); case and surrounding spaces are ignored.

    Returns:
        The window, or ``None`` for ``None``/empty text and for anything that does not parse
        (``"all"`` included).
    """
    if not text:
        return None
    text = text.strip().lower()
    units = {"d": 86400, "h": 3600, "w": 604800, "m": 60}
    try:
        if text[-1] in units:
            return timedelta(seconds=float(text[:-1]) * units[text[-1]])
        return timedelta(days=float(text))
    except (ValueError, IndexError):
        return None


def _bucket(**extra: Any) -> dict[str, Any]:
    return {
        "runs": 0,
        "entries": 0,
        "tokens": 0,
        "cache_read": 0,
        "cache_creation": 0,
        "io": 0,
        "cost_usd": 0.0,
        **extra,
    }


def _transcript_label(row: CostRow) -> str:
    """A row's ``transcript`` as ``cost --by transcript`` groups it: a transcript's file name;
    a jobless call's label (``dedupe:github.com/acme/shop``) whole, since a repository key
    has slashes too and two repositories must not fold into one ``shop``."""
    text = row.transcript or "?"
    if row.job_id is None and not text.startswith("/"):
        return text
    return text.rsplit("/", 1)[-1] or "?"


def cost_report(
    session: Session, *, by: str = "day", since: timedelta | None = None
) -> dict[str, Any]:
    """Aggregate cost rows (SPEC-drain §6.2 columns) for ``reflect-jobs cost``.

    A row's cost is what the CLI reported, or :func:`estimate_cost` when it reported none.

    Args:
        session: An open ledger session.
        by: ``day``, ``transcript`` (file name), ``model``, ``outcome``, ``writer`` or
            ``backend``; anything else groups by day.
        since: Only rows at most this old; ``None`` for all of them.

    Returns:
        ``{"by": by, "rows": {key: bucket}, "total": bucket}``, rows sorted by key. A bucket
        holds ``runs``, ``entries``, ``tokens``, ``cache_read``, ``cache_creation``, ``io``
        (input + output) and ``cost_usd`` (rounded to 6 places); row buckets also have
        ``max_run_tokens`` and the total has ``cache_reuse`` (cache reads / tokens).
    """
    query = select(CostRow)
    if since is not None:
        query = query.where(CostRow.at >= utcnow() - since)
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: _bucket(max_run_tokens=0))
    total = _bucket()
    for row in session.scalars(query):
        key = {
            "day": row.day,
            "transcript": _transcript_label(row),
            "model": row.model or "?",
            "outcome": row.outcome or "?",
            "writer": row.writer_class or "?",
            "backend": row.backend or "?",
        }.get(by, row.day)
        cost = (
            row.cost_usd
            if row.cost_usd and row.cost_usd > 0
            else (
                estimate_cost(
                    row.model,
                    row.input,
                    row.output,
                    row.cache_read,
                    row.cache_creation,
                    row.backend or "",
                )
                if row.tokens
                else 0.0
            )
        )
        for bucket in (rows[key], total):
            bucket["runs"] += 1
            bucket["entries"] += row.entries
            bucket["tokens"] += row.tokens
            bucket["cache_read"] += row.cache_read
            bucket["cache_creation"] += row.cache_creation
            bucket["io"] += row.input + row.output
            bucket["cost_usd"] += cost
        rows[key]["max_run_tokens"] = max(rows[key]["max_run_tokens"], row.tokens)
    for bucket in [*rows.values(), total]:
        bucket["cost_usd"] = round(bucket["cost_usd"], 6)
    total["cache_reuse"] = (
        round(total["cache_read"] / total["tokens"], 4) if total["tokens"] else 0.0
    )
    return {"by": by, "rows": dict(sorted(rows.items())), "total": total}


def last_success_at(session: Session) -> datetime | None:
    """When a write last succeeded.

    Args:
        session: An open ledger session.

    Returns:
        The newest ``at`` of a cost row with outcome ``ok``, or ``None``.
    """
    return session.scalars(
        select(CostRow.at).where(CostRow.outcome == "ok").order_by(CostRow.at.desc())
    ).first()
