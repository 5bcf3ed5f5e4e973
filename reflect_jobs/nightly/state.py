"""The nightly layer's bookkeeping in the ledger: when each part last ran, the run's claim,
and the promoter lease (docs/NIGHTLY.md).

All of it is ledger control flags (``controls``: key → JSON), not Huey keys and not a new
table: the ledger is the durable truth every worker and machine shares (a Redis queue may be
flushed), and a flag is claimed by compare-and-set (an UPDATE on the value read, or an INSERT
that fails on a race), so two workers that find the pass due at once run it once, and two
machines that both want to promote get one promoter.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from reflect_jobs.ledger import owners
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Control, utcnow

RUN_KEY = "nightly:run"
PROMOTER_KEY = "nightly:promoter"
#: A run that has not finished after this long is taken over (its worker was killed).
RUN_STALE = timedelta(hours=2)
#: The promoter lease outlives a missed night, so a machine asleep for one night keeps it.
PROMOTER_LEASE = timedelta(hours=36)

__all__ = [
    "PROMOTER_KEY",
    "RUN_KEY",
    "claim_promoter",
    "claim_run",
    "finish_run",
    "flag_key",
    "last_run",
    "read",
    "write",
]


def flag_key(part: str, scope: str) -> str:
    """A part's flag for one scope (a repository key): at most 64 characters.

    Args:
        part: ``analyzer``, ``synthesis``, ``memory``…
        scope: The repository key (or ``global``).

    Returns:
        ``nightly:<part>:<24 hex of the scope's sha256>``.
    """
    return f"nightly:{part}:" + hashlib.sha256(scope.encode()).hexdigest()[:24]


def _load(raw: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read(db_url: str, key: str) -> dict[str, Any] | None:
    """A flag's JSON value.

    Args:
        db_url: The ledger.
        key: The flag.

    Returns:
        The object, ``None`` when unset or not a JSON object.
    """
    with session_scope(db_url, readonly=True) as session:
        row = session.get(Control, key)
        return _load(row.value if row else None)


def write(db_url: str, key: str, value: dict[str, Any]) -> None:
    """Set a flag (insert or overwrite) in its own commit.

    Args:
        db_url: The ledger.
        key: The flag.
        value: Its JSON object.
    """
    raw = json.dumps(value, sort_keys=True)
    with session_scope(db_url) as session:
        row = session.get(Control, key)
        if row is None:
            session.add(Control(key=key, value=raw, updated_at=utcnow()))
        else:
            row.value, row.updated_at = raw, utcnow()


def _cas(db_url: str, key: str, old: str | None, new: dict[str, Any]) -> bool:
    """Set ``key`` to ``new`` only if it still holds ``old`` (``None``: only if unset)."""
    raw = json.dumps(new, sort_keys=True)
    try:
        with session_scope(db_url) as session:
            if old is None:
                if session.get(Control, key) is not None:
                    return False
                session.add(Control(key=key, value=raw, updated_at=utcnow()))
                session.flush()
                return True
            done = session.execute(
                update(Control)
                .where(Control.key == key, Control.value == old)
                .values(value=raw, updated_at=utcnow())
            )
            return getattr(done, "rowcount", 0) == 1
    except IntegrityError:  # another worker inserted it first
        return False


def _raw(db_url: str, key: str) -> str | None:
    with session_scope(db_url, readonly=True) as session:
        row = session.get(Control, key)
        return row.value if row else None


def _at(value: dict[str, Any] | None, field: str) -> datetime | None:
    try:
        at = datetime.fromisoformat(str((value or {})[field]))
    except (KeyError, ValueError):
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def last_run(db_url: str) -> datetime | None:
    """When the last nightly run completed.

    Args:
        db_url: The ledger.

    Returns:
        An aware datetime, ``None`` when it never completed.
    """
    value = read(db_url, RUN_KEY)
    return _at(value, "done_at")


def _holder_alive(value: dict[str, Any]) -> bool | None:
    """Whether the recorded run's process still runs (``ledger/owners.alive``)."""
    try:
        holder = owners.Owner(str(value["host"]), int(value["pid"]), str(value.get("start", "")))
    except (KeyError, TypeError, ValueError):
        return None
    return owners.alive(holder)


def claim_run(db_url: str, now: datetime) -> bool:
    """Claim the run: False while another run holds it.

    A run is held while its process provably runs, or — when that cannot be told (another
    machine) — until :data:`RUN_STALE` after it started. A run whose process is gone (a kill)
    is taken over at once and resumes.

    Args:
        db_url: The ledger.
        now: This run's start.

    Returns:
        True when this process runs the pass now.
    """
    old = _raw(db_url, RUN_KEY)
    value = _load(old) or {}
    started = _at(value, "started_at")
    if value.get("state") == "running" and started is not None:
        live = _holder_alive(value)
        if live or (live is None and now - started < RUN_STALE):
            return False
    me = owners.me()
    new = {
        **value,
        "state": "running",
        "started_at": now.isoformat(),
        "host": me.host,
        "pid": me.pid,
        "start": me.start,
    }
    return _cas(db_url, RUN_KEY, old, new)


def finish_run(db_url: str, now: datetime, *, completed: bool) -> None:
    """Record the run's end; an incomplete run (a part deferred) stays due.

    Args:
        db_url: The ledger.
        now: When it ended.
        completed: Every part finished (the run is not owed again until the next slot).
    """
    value = read(db_url, RUN_KEY) or {}
    value["state"] = "idle"
    if completed:
        value["done_at"] = now.isoformat()
    write(db_url, RUN_KEY, value)


def claim_promoter(db_url: str, host: str, now: datetime) -> tuple[bool, str]:
    """Take or renew the promoter lease: one machine writes MEMORY.md (seed 002).

    Args:
        db_url: The ledger (shared by every machine when it is PostgreSQL).
        host: This machine's name (``REFLECT_HOST``).
        now: The time.

    Returns:
        ``(True, "")`` when this machine promotes (the lease renewed for
        :data:`PROMOTER_LEASE`), else ``(False, why)``.
    """
    old = _raw(db_url, PROMOTER_KEY)
    value = _load(old) or {}
    holder, until = value.get("host"), _at(value, "until")
    if holder and holder != host and until is not None and until > now:
        return False, f"{holder} holds the promoter lease until {until:%Y-%m-%d %H:%M} UTC"
    new = {"host": host, "until": (now + PROMOTER_LEASE).isoformat()}
    if _cas(db_url, PROMOTER_KEY, old, new):
        return True, ""
    taken = read(db_url, PROMOTER_KEY) or {}
    return False, f"{taken.get('host', 'another machine')} took the promoter lease first"


def due(db_url: str, now: datetime, at: str) -> bool:
    """Whether the worker's minutely check should start a nightly run now.

    Due when no run completed since the latest ``at`` slot. A ledger that never saw a run
    records ``now`` as its baseline and is not due: a new installation missed no night, so
    its first run is the next slot, while a worker that was down at the slot catches up once
    when it starts.

    Args:
        db_url: The ledger.
        now: The time (UTC).
        at: ``REFLECT_NIGHTLY_AT`` (local ``HH:MM``).

    Returns:
        ``True`` when a run is due.
    """
    from .schedule import due as slot_due

    last = last_run(db_url)
    if last is None:
        finish_run(db_url, now, completed=True)
        return False
    return slot_due(now, at, last)
