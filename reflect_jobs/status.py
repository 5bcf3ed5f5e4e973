"""What ``reflect-jobs status`` reports — built to not lie (SPEC-drain §10.2 lessons).

Two outages of the original ran for 10 and 11 days while its log looked healthy. So besides
counts this reports the conditions that looked like health there: jobs waiting while
nothing has succeeded for a long time, a halted write stage, a stale worker heartbeat,
today's budget spent with zero successes, and poisoned jobs piling up.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from .config import Settings
from .ledger import control, costs, proposals
from .ledger.db import session_scope
from .ledger.models import CostRow, Job, utcnow
from .lifecycle import JOB_STATES, RUNNABLE_STATES

HEARTBEAT_STALE = timedelta(minutes=5)


def collect_status(settings: Settings) -> dict[str, Any]:
    """Everything ``status`` prints, from one read-only ledger snapshot and the caps.

    Warnings are raised for a halted write stage; jobs waiting longer than
    ``stall_warn_sec`` with no success in that time; waiting jobs with no worker heartbeat
    in :data:`HEARTBEAT_STALE`; today's budget spent with zero successes; and jobs poisoned
    in the last 24 hours.

    Args:
        settings: The settings (ledger, queue, caps and quota-gate configuration).

    Returns:
        ``counts`` (jobs per state, every state present), ``budget`` (``day``, ``used`` —
        the larger of the caps' and the ledger's count — and ``limit``), ``run_window``
        (``used``, ``limit``, ``resets_at``; ``limit`` and ``resets_at`` are ``None`` when
        ``REFLECT_DRAIN_DEBOUNCE_SEC`` is 0: no per-window cap), ``quota`` (``gate`` ``open``/``closed``,
        ``reason``, ``window``; always open when the gate is off), ``proposals``
        (``pending``: retirements held back by the daily retire cap), ``halted``,
        ``halt_reason``, ``last_success_at`` and ``heartbeat_at`` (ISO 8601 or ``None``),
        ``stores`` (redacted URLs) and ``warnings`` (one line each).
    """
    from .limits import Caps
    from .queue import make_huey
    from .writer.quota import quota_gate

    huey = make_huey(settings)
    caps = Caps(
        huey.storage,
        daily_max=settings.daily_max,
        run_max=settings.run_max,
        window_sec=settings.debounce_sec,
    )
    usage = caps.usage()
    now = utcnow()
    warnings: list[str] = []
    with session_scope(settings.db_url, readonly=True) as session:
        counts = Counter({s: 0 for s in JOB_STATES})
        counts.update(
            dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        )
        halt = control.halt_reason(session)
        last_ok = costs.last_success_at(session)
        beat = control.last_heartbeat(session)
        snaps = control.quota_snapshots(session)
        pending_proposals = proposals.pending_count(session)
        day = usage["day"]
        ledger_used = costs.budget_used(session, str(day))
        today_ok = (
            session.scalar(
                select(func.count())
                .select_from(CostRow)
                .where(CostRow.day == day, CostRow.outcome == "ok")
            )
            or 0
        )
        oldest_wait = session.scalar(
            select(func.min(Job.created_at)).where(Job.state.in_(RUNNABLE_STATES))
        )
        poisoned_day = (
            session.scalar(
                select(func.count())
                .select_from(Job)
                .where(Job.state == "poisoned", Job.finished_at >= now - timedelta(days=1))
            )
            or 0
        )
    decision = (
        quota_gate(
            snaps,
            now=now.timestamp(),
            ttl_sec=settings.quota_ttl_sec,
            util_threshold=settings.quota_util_threshold,
            api_key_auth=settings.api_key_auth,
        )
        if settings.quota_gate
        else None
    )
    waiting = sum(counts[s] for s in (*RUNNABLE_STATES, "halted"))
    if halt:
        warnings.append(f"write stage halted: {halt}")
    if (
        waiting
        and oldest_wait is not None
        and now - oldest_wait > timedelta(seconds=settings.stall_warn_sec)
    ):
        since = f"since {last_ok:%Y-%m-%d %H:%M}" if last_ok else "ever"
        if last_ok is None or now - last_ok > timedelta(seconds=settings.stall_warn_sec):
            warnings.append(f"{waiting} job(s) waiting and no success {since}")
    if waiting and (beat is None or now - beat > HEARTBEAT_STALE):
        warnings.append(
            "no worker heartbeat in the last 5 minutes: is `reflect-jobs worker` running?"
        )
    used = max(int(usage["daily_used"]), ledger_used)
    if used >= settings.daily_max and today_ok == 0:
        warnings.append(
            f"today's budget ({settings.daily_max}) was spent with zero successes (drain_budget_all_failures)"
        )
    if poisoned_day:
        warnings.append(
            f"{poisoned_day} job(s) poisoned in the last 24 h: `reflect-jobs poison list`"
        )
    return {
        "counts": dict(counts),
        "budget": {"day": day, "used": used, "limit": settings.daily_max},
        "run_window": {
            "used": usage["run_used"],
            "limit": usage["run_limit"],
            "resets_at": usage["run_resets_at"],
        },
        "quota": {
            "gate": "open" if decision is None or decision.open else "closed",
            "reason": "" if decision is None else decision.reason,
            "window": "" if decision is None else decision.window,
        },
        "proposals": {"pending": pending_proposals},
        "halted": bool(halt),
        "halt_reason": halt,
        "last_success_at": last_ok.isoformat() if last_ok else None,
        "heartbeat_at": beat.isoformat() if beat else None,
        "stores": settings.redacted_urls(),
        "warnings": warnings,
    }
