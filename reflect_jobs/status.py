"""What ``reflect-jobs status`` reports — built to not lie (SPEC-drain §10.2 lessons).

Two outages of the original ran for 10 and 11 days while its log looked healthy. So besides
counts this reports the conditions that looked like health there: jobs waiting while
nothing has succeeded for a long time, a halted write stage, a stale worker heartbeat,
today's budget spent with zero successes, and poisoned jobs piling up.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from .config import Settings
from .consumers import STALE, duplicate_workers, live_consumers
from .hook_errors import count as hook_error_count
from .ledger import control, costs, proposals, review, spend
from .ledger.db import session_scope
from .ledger.models import CostRow, Job, JobEvent, SessionCheckpoint, utcnow
from .lifecycle import JOB_STATES, RUNNABLE_STATES
from .pipeline import global_cap

HEARTBEAT_STALE = timedelta(minutes=5)
#: Writes held back (caps, quota gate, write lease) longer than this raise a warning.
DEFERRED_WARN = timedelta(hours=1)


def held_writes(session: Session, now: datetime) -> tuple[int, datetime | None, str]:
    """Write-stage jobs deferred for longer than :data:`DEFERRED_WARN`, and why.

    A deferred write is claimed again when its time comes and deferred again while its
    gate stays shut, so the job's current state says nothing about how long it has waited:
    its events do. It has been held since the first event of its last unbroken run of
    claims and deferrals at the write stage. Before, ``REFLECT_DRAIN_MAX=0`` deferred every
    write for ever and nothing said so. One query (``status --line`` runs in shell prompts).

    Args:
        session: An open ledger session.
        now: The current time.

    Returns:
        ``(jobs held longer than DEFERRED_WARN, since when the oldest is held, the last
        reason it was deferred)``; ``(0, None, "")`` when none is.
    """
    held_run = (JobEvent.to_stage == "write") & JobEvent.to_state.in_(("deferred", "running"))
    before = aliased(JobEvent)
    last_break = (
        select(func.coalesce(func.max(before.id), 0))
        .where(
            before.job_id == JobEvent.job_id,
            ~((before.to_stage == "write") & before.to_state.in_(("deferred", "running"))),
        )
        .scalar_subquery()
    )
    rows = session.execute(
        select(JobEvent.job_id, func.min(JobEvent.at))
        .join(Job, Job.id == JobEvent.job_id)
        .where(Job.stage == "write", Job.state == "deferred", held_run, JobEvent.id > last_break)
        .group_by(JobEvent.job_id)
    ).all()
    held = [
        (_aware(since), job_id) for job_id, since in rows if now - _aware(since) > DEFERRED_WARN
    ]
    if not held:
        return 0, None, ""
    since, job_id = min(held)
    reason = session.scalar(
        select(JobEvent.detail)
        .where(JobEvent.job_id == job_id, JobEvent.to_state == "deferred")
        .order_by(JobEvent.id.desc())
        .limit(1)
    )
    return len(held), since, reason or ""


def _aware(when: datetime) -> datetime:
    """SQLite hands aggregates back naive (in UTC)."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def collect_status(settings: Settings) -> dict[str, Any]:
    """Everything ``status`` prints, from one read-only ledger snapshot and the caps.

    Warnings are raised for a halted write stage; jobs waiting longer than
    ``stall_warn_sec`` with no success in that time; waiting jobs with no worker heartbeat
    in :data:`HEARTBEAT_STALE` (naming the cause when captures wait in the queue or the
    spool and no worker is running); today's budget spent with zero successes; writes deferred
    for more than an hour (:func:`held_writes`: a cap, the quota gate or a setting holding
    every paid call back); jobs poisoned in the last 24 hours; hook errors in the last 24
    hours; and two workers on one home.

    Args:
        settings: The settings (ledger, queue, caps and quota-gate configuration).

    Returns:
        ``counts`` (jobs per state, every state present), ``budget`` (``day``, ``used`` —
        the larger of the caps' and the ledger's count — and ``limit``), ``run_window``
        (``used``, ``limit``, ``resets_at``; ``limit`` and ``resets_at`` are ``None`` when
        ``REFLECT_DRAIN_DEBOUNCE_SEC`` or ``REFLECT_DRAIN_MAX`` is 0: no per-window cap), ``quota`` (``gate`` ``open``/``closed``,
        ``reason``, ``window``; always open when the gate is off), ``proposals``
        (``pending``: retirements held back by the daily retire cap), ``review``
        (``pending``: learnings waiting for review, ARCHITECTURE §7.1 — the proposed ones
        and the pending globals, told only in their repository until a second session or a
        person confirms them; ``pending_global``: how many of them are those), ``halted``,
        ``halt_reason``, ``last_success_at`` and ``heartbeat_at`` (ISO 8601 or ``None``),
        ``stores`` (redacted URLs), ``queue`` (``pending``, ``captures``, ``spooled``:
        see :func:`queue_pending`), ``sessions`` (``checkpoints``: the thresholds or
        ``off``; ``tracked``: sessions with a checkpoint state; ``idle_owed``: sessions owed
        their idle deep pass; ``next_idle_at``: the earliest, ISO 8601 or ``None``;
        ARCHITECTURE §14.1), ``workers`` (the running consumers, each with the
        configuration it recorded: ``consumers.live_consumers``), ``hook_errors`` (hook
        failures logged in the last 24 h) and ``warnings`` (one line each).
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
    queue = queue_pending(huey, str(settings.home))
    with session_scope(settings.db_url, readonly=True) as session:
        counts = Counter({s: 0 for s in JOB_STATES})
        counts.update(
            dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        )
        halt = control.halt_reason(session)
        last_ok = spend.last_success_at(session)
        beat = control.last_heartbeat(session)
        beats = control.heartbeats_since(session, now - STALE)
        snaps = control.quota_snapshots(session)
        pending_proposals = proposals.pending_count(session)
        waiting_review = review.pending_count(session)
        pending_global = global_cap.pending_global_count(session)
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
        tracked = session.scalar(select(func.count()).select_from(SessionCheckpoint)) or 0
        idle_owed, next_idle = session.execute(
            select(func.count(), func.min(SessionCheckpoint.idle_due_at)).where(
                SessionCheckpoint.idle_due_at.is_not(None)
            )
        ).one()
        held_count, held_since, held_reason = held_writes(session, now)
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
    no_beat = beat is None or now - beat > HEARTBEAT_STALE
    if queue["captures"] and no_beat:
        warnings.append(
            f"{queue['captures']} capture(s) waiting in the queue and no worker heartbeat "
            f"{'ever' if beat is None else 'in the last 5 minutes'}: no worker is running; "
            "start one with `reflect-jobs worker` (or `reflect-jobs install service`)"
        )
    elif waiting and no_beat:
        warnings.append(
            "no worker heartbeat in the last 5 minutes: is `reflect-jobs worker` running?"
        )
    if queue["error"]:
        warnings.append(f"queue not readable: {queue['error']}")
    used = max(int(usage["daily_used"]), ledger_used)
    if used >= settings.daily_max and today_ok == 0:
        warnings.append(
            f"today's budget ({settings.daily_max}) was spent with zero successes (drain_budget_all_failures)"
        )
    if held_count:
        warnings.append(
            f"{held_count} write(s) deferred for more than an hour (the oldest since "
            f"{held_since:%Y-%m-%d %H:%M} UTC; last reason: {held_reason or 'unknown'})"
        )
    if poisoned_day:
        warnings.append(
            f"{poisoned_day} job(s) poisoned in the last 24 h: `reflect-jobs poison list`"
        )
    hook_errors = hook_error_count(settings.home)
    if hook_errors:
        warnings.append(
            f"{hook_errors} hook error(s) in the last 24 h (captures or context may be "
            f"missing): `reflect-jobs errors`"
        )
    workers = live_consumers(beats, now=now)
    for group in duplicate_workers(workers):
        warnings.append(
            f"{len(group)} workers on one home ({group[0]['home']}, {group[0]['host']}): "
            + ", ".join(f"pid {c['pid']}" for c in group)
            + "; stop all but one (`systemctl --user status reflect-jobs`, `kill PID`)"
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
        "review": {
            "pending": waiting_review + pending_global,
            "pending_global": pending_global,
        },
        "halted": bool(halt),
        "halt_reason": halt,
        "last_success_at": last_ok.isoformat() if last_ok else None,
        "heartbeat_at": beat.isoformat() if beat else None,
        "workers": workers,
        "hook_errors": hook_errors,
        "stores": settings.redacted_urls(),
        "queue": {k: v for k, v in queue.items() if k != "error"},
        "sessions": {
            "checkpoints": ",".join(map(str, settings.checkpoints)) or "off",
            "tracked": int(tracked),
            "idle_owed": int(idle_owed or 0),
            "next_idle_at": _iso(next_idle),
        },
        "warnings": warnings,
    }


def _iso(when: datetime | None) -> str | None:
    """``when`` as ISO 8601 in UTC (SQLite hands aggregates back naive, in UTC), or None."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()


CAPTURE_TASK = "reflect_jobs.tasks.capture"


def queue_pending(huey: Any, home: str) -> dict[str, Any]:
    """What waits for a worker: Huey messages and spooled captures, each capture once.

    A hook capture normally sits in both places (its spool entry names itself in the
    message's ``spool_id``), so an entry counts only when no waiting message carries its
    id: one left by a killed worker, or by a queue that was down when the hook ran.

    Args:
        huey: The Huey instance of the settings' queue (only its storage is read; the
            messages are deserialised, not run).
        home: ``$REFLECT_HOME``, which holds the spool.

    Returns:
        ``pending`` (queue messages plus spooled captures without a message), ``captures``
        (how many of those are captures), ``spooled`` (entries in the spool) and ``error``
        (``None``, or one line when the queue could not be read; the counts then cover
        the spool only).
    """
    from . import spool

    entries = set(spool.entry_ids(home))
    messages: list[Any] = []
    error = None
    try:
        for raw in huey.storage.enqueued_items():
            try:
                messages.append(huey.serializer.deserialize(raw))
            except Exception:  # noqa: BLE001 - an unreadable message still waits
                messages.append(None)
    except Exception as exc:  # noqa: BLE001 - status must answer with the queue down
        error = f"{type(exc).__name__}: {exc}"[:200]
    captures = [m for m in messages if getattr(m, "name", None) == CAPTURE_TASK]
    carried = {(getattr(m, "kwargs", None) or {}).get("spool_id") for m in captures}
    orphans = len(entries - carried)
    return {
        "pending": len(messages) + orphans,
        "captures": len(captures) + orphans,
        "spooled": len(entries),
        "error": error,
    }
