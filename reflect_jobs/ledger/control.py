"""Small shared state in the ledger: the write-stage halt, worker heartbeats, quota
telemetry and the errors ledger (SPEC-drain §5.11).

These live in the ledger rather than in files so that several consumers on several
machines see the same halt, the same quota gate and the same error list.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from reflect_jobs.gates import Defer, FreeGate, Go

from .db import rows_affected
from .models import Control, ErrorRecord, Heartbeat, QuotaSnapshot, utcnow

HALT_KEY = "write_halted"
#: How long a consumer that stopped beating keeps its heartbeat row (see prune_heartbeats).
HEARTBEAT_RETENTION = timedelta(days=7)


def get_flag(session: Session, key: str) -> str | None:
    """A control flag's value.

    Args:
        session: An open ledger session.
        key: The flag's name (e.g. :data:`HALT_KEY`).

    Returns:
        The stored value, or ``None`` when the flag is not set.
    """
    row = session.get(Control, key)
    return row.value if row else None


def set_flag(session: Session, key: str, value: str) -> None:
    """Set a control flag (insert or overwrite), stamping ``updated_at``.

    Args:
        session: An open ledger session; the change is committed with it.
        key: The flag's name.
        value: Its new value.
    """
    row = session.get(Control, key)
    if row is None:
        session.add(Control(key=key, value=value, updated_at=utcnow()))
    else:
        row.value = value
        row.updated_at = utcnow()


def clear_flag(session: Session, key: str) -> None:
    """Remove a control flag; clearing one that is not set is a no-op.

    Args:
        session: An open ledger session; the change is committed with it.
        key: The flag's name.
    """
    session.execute(delete(Control).where(Control.key == key))


def halt_reason(session: Session) -> str | None:
    """Why the write stage is paused, or None when it runs.

    Args:
        session: An open ledger session.

    Returns:
        The halt reason stored under :data:`HALT_KEY`, or ``None``.
    """
    return get_flag(session, HALT_KEY)


class HaltGate(FreeGate):
    """The write-stage halt flag as a gate (:mod:`reflect_jobs.gates`), asked in the claim's
    transaction: held (no time ends it) until a person's ``resume`` clears the flag.

    Args:
        session: The claim's open ledger session.
    """

    name = "halt"

    def __init__(self, session: Session) -> None:
        """Bind the gate to the claim's transaction."""
        self.session = session

    def acquire(self) -> Go | Defer:
        """Read the flag.

        Returns:
            ``Go`` when the write stage runs, else ``Defer`` with no time and the reason.
        """
        reason = halt_reason(self.session)
        if reason:
            return Defer(self.name, f"write stage halted: {reason}")
        return Go(self.name)


def incr_counter(session: Session, key: str) -> int:
    """A ledger counter (graph maintenance cadence); read-modify-write under the txn lock.

    Args:
        session: An open write session (the row is read ``FOR UPDATE`` on PostgreSQL; on
            SQLite the ``BEGIN IMMEDIATE`` write lock serialises it).
        key: The counter's control key; a missing or non-numeric value counts as 0.

    Returns:
        The counter's new value (at least 1).
    """
    row = session.get(Control, key, with_for_update=True)
    value = (int(row.value) if row and row.value.isdigit() else 0) + 1
    set_flag(session, key, str(value))
    return value


def beat(session: Session, worker: str, config: dict[str, Any] | None = None) -> None:
    """Record that ``worker`` is alive now (``status`` and ``doctor`` read the newest beat).

    Args:
        session: An open ledger session; the change is committed with it.
        worker: The worker's id; its first beat also stores this host name and process id.
        config: The consumer's effective configuration (``consumers.effective_config``);
            stored when given, so ``status`` and ``doctor`` report what the worker uses.
    """
    now = utcnow()
    row = session.get(Heartbeat, worker)
    if row is None:
        session.add(
            Heartbeat(
                worker=worker,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=now,
                beat_at=now,
                config=config,
            )
        )
    else:
        row.beat_at = now
        if config is not None and row.config != config:
            row.config = config


def heartbeats_since(session: Session, since: datetime) -> list[dict[str, Any]]:
    """Every consumer that beat at or after ``since``, newest beat first.

    Args:
        session: An open ledger session.
        since: The oldest beat to include.

    Returns:
        ``{"worker", "host", "pid", "started_at", "beat_at", "config"}`` per consumer
        (``config`` None for a consumer from before migration 0006).
    """
    rows = session.scalars(
        select(Heartbeat).where(Heartbeat.beat_at >= since).order_by(Heartbeat.beat_at.desc())
    )
    return [
        {
            "worker": r.worker,
            "host": r.host,
            "pid": r.pid,
            "started_at": r.started_at,
            "beat_at": r.beat_at,
            "config": r.config,
        }
        for r in rows
    ]


def last_heartbeat(session: Session) -> datetime | None:
    """When any worker last beat.

    Args:
        session: An open ledger session.

    Returns:
        The newest ``beat_at`` (UTC), or ``None`` if no worker ever beat.
    """
    return session.scalars(select(Heartbeat.beat_at).order_by(Heartbeat.beat_at.desc())).first()


def prune_heartbeats(session: Session, older_than: timedelta = HEARTBEAT_RETENTION) -> int:
    """Forget consumers that stopped beating ``older_than`` ago; the newest row always stays.

    Every consumer start adds a row (one per host:pid), so without this the table grows by
    one row per restart forever. ``status`` and ``doctor`` read only the newest beat, which is
    never deleted, so what they report does not change.

    Args:
        session: An open ledger session.
        older_than: The retention (default a week: far past the 5-minute staleness warning).

    Returns:
        How many rows were deleted.
    """
    newest = last_heartbeat(session)
    if newest is None:
        return 0
    cutoff = min(utcnow() - older_than, newest)
    return rows_affected(session, delete(Heartbeat).where(Heartbeat.beat_at < cutoff)) or 0


# --- quota telemetry -------------------------------------------------------------------


def store_quota_snapshots(
    session: Session,
    snapshots: list[dict[str, Any]],
    bucket_of: Callable[[dict[str, Any]], str],
) -> int:
    """Last write wins per bucket (SPEC-drain §5.5 ingest).

    Args:
        session: An open ledger session; the change is committed with it.
        snapshots: Rate-limit snapshots reported by the writer CLI; each is stored with an
            added ``observed_at`` (epoch seconds, now).
        bucket_of: Maps a snapshot to its bucket name (the row key), e.g.
            :func:`reflect_jobs.writer.quota.bucket_of`.

    Returns:
        How many snapshots were stored.
    """
    now = utcnow().timestamp()
    for snap in snapshots:
        bucket = bucket_of(snap)
        row = session.get(QuotaSnapshot, bucket)
        data = dict(snap, observed_at=now)
        if row is None:
            session.add(QuotaSnapshot(bucket=bucket, snapshot=data, observed_at=now))
        else:
            row.snapshot = data
            row.observed_at = now
    return len(snapshots)


def quota_snapshots(session: Session) -> dict[str, dict[str, Any]]:
    """The latest stored rate-limit snapshot of every bucket, for the quota gate.

    Args:
        session: An open ledger session.

    Returns:
        ``{bucket: snapshot}``, each snapshot with its ``observed_at`` (epoch seconds).
    """
    return {
        row.bucket: dict(row.snapshot, observed_at=row.observed_at)
        for row in session.scalars(select(QuotaSnapshot))
    }


# --- the errors ledger -----------------------------------------------------------------

ERROR_CAP = 200


def record_error(
    session: Session,
    *,
    kind: str,
    message: str,
    severity: str = "error",
    source: str = "drain",
    context: dict[str, Any] | None = None,
) -> str:
    """Append or bump an error; identical errors within 24 h share a row (SPEC-drain §5.11).

    Identical means the same source, kind and (truncated) message. Bumping counts it, moves
    ``last_at`` and un-acknowledges it; an identical error older than 24 h starts a new row.
    Only the newest :data:`ERROR_CAP` rows are kept.

    Args:
        session: An open ledger session; the change is committed with it.
        kind: What failed (a short machine-readable word).
        message: The error text; cut to 500 characters.
        severity: ``"error"`` or ``"warn"``; a bump keeps the row's first severity.
        source: Which part of the system reported it.
        context: JSON-able details; on a bump, ``None`` keeps the previous context.

    Returns:
        The error's id, ``err-`` and six hex digits of a hash of source, kind and message.
    """
    message = message[:500]
    err_id = "err-" + hashlib.sha1(f"{source}|{kind}|{message}".encode()).hexdigest()[:6]
    now = utcnow()
    row = session.get(ErrorRecord, err_id)
    if row is not None and now - row.last_at < timedelta(hours=24):
        row.count += 1
        row.last_at = now
        row.acked = False
        row.context = context or row.context
        return err_id
    if row is not None:
        session.delete(row)
        session.flush()
    session.add(
        ErrorRecord(
            id=err_id,
            severity=severity,
            source=source,
            kind=kind,
            message=message,
            context=context,
            first_at=now,
            last_at=now,
        )
    )
    # Bounded: keep the newest ERROR_CAP rows.
    old = session.scalars(
        select(ErrorRecord.id).order_by(ErrorRecord.last_at.desc()).offset(ERROR_CAP)
    ).all()
    if old:
        session.execute(delete(ErrorRecord).where(ErrorRecord.id.in_(old)))
    return err_id
