"""Which consumers are running, with the configuration *they* use (``status``, ``doctor``).

``doctor`` used to report the shell's configuration: it said "heuristic" while the service
wrote with claude, because the service's environment is not the shell's. So each consumer
records its effective configuration with its heartbeat (:func:`effective_config`,
``ledger/control.py:beat``), and ``status``/``doctor`` read it back
(:func:`live_consumers`). Two workers on one home of one host (a service and a forgotten
``reflect-jobs worker`` in a terminal) used to start silently; :func:`duplicate_workers`
names them. Several workers on several machines sharing PostgreSQL and Redis are the
scale-out design and are not flagged.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from .config import Settings

#: A consumer that has not beaten for this long is not running (it beats every minute).
STALE = timedelta(minutes=5)


def version() -> str:
    """The installed reflect-jobs version (what ``reflect-jobs --version`` prints).

    Returns:
        The version, or ``unknown`` without package metadata.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("reflect-jobs")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


def effective_config(settings: Settings, kind: str) -> dict[str, Any]:
    """What a consumer records with its heartbeat.

    Args:
        settings: The consumer's settings.
        kind: ``worker`` (the service, ``reflect-jobs worker``) or ``drain``.

    Returns:
        ``{"kind", "home", "kb_path", "writer_backend", "model", "version", "pid",
        "host"}``; ``writer_backend`` is the one ``auto`` resolved to.
    """
    return {
        "kind": kind,
        "home": str(settings.home),
        "kb_path": str(settings.kb_path),
        "writer_backend": settings.resolved_writer_backend(),
        "model": settings.model,
        "version": version(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with that id exists (signal 0).

    Args:
        pid: The process id.

    Returns:
        True when it exists (someone else's process included).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def live_consumers(rows: list[dict[str, Any]], *, now: datetime) -> list[dict[str, Any]]:
    """The consumers that are running, from ``control.heartbeats_since`` rows.

    A row of this host whose process is gone is dropped at once (a stopped worker's last
    beat is up to a minute old); one of another host counts while it beat within
    :data:`STALE`.

    Args:
        rows: Heartbeat rows.
        now: The current time (UTC).

    Returns:
        One dict per running consumer: ``host``, ``pid``, ``beat_at`` and ``started_at``
        (ISO 8601), ``kind``, ``home``, ``kb_path``, ``writer_backend``, ``model``,
        ``version`` (``None`` each for a consumer that recorded no configuration).
    """
    here = socket.gethostname()
    out = []
    for r in rows:
        if now - r["beat_at"] > STALE:
            continue
        if r["host"] == here and not pid_alive(r["pid"]):
            continue
        cfg = r.get("config") or {}
        out.append(
            {
                "host": r["host"],
                "pid": r["pid"],
                "beat_at": r["beat_at"].isoformat(),
                "started_at": r["started_at"].isoformat(),
                **{
                    k: cfg.get(k)
                    for k in ("kind", "home", "kb_path", "writer_backend", "model", "version")
                },
            }
        )
    return out


def duplicate_workers(consumers: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Groups of two or more workers (not drains) on the same home of the same host.

    Args:
        consumers: From :func:`live_consumers`.

    Returns:
        One list per home that has more than one worker, oldest first.
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in consumers:
        if c.get("kind") != "worker" or not c.get("home"):
            continue
        groups.setdefault((c["host"], c["home"]), []).append(c)
    return [
        sorted(g, key=lambda c: c["started_at"])
        for g in groups.values()
        if len({c["pid"] for c in g}) > 1
    ]


def describe(c: dict[str, Any]) -> str:
    """One consumer in a line: ``worker pid 12 on h (claude / sonnet, home ~/.reflect, v0.1)``.

    Args:
        c: A consumer from :func:`live_consumers`.

    Returns:
        The line.
    """
    what = f"{c.get('kind') or 'consumer'} pid {c['pid']} on {c['host']}"
    if not c.get("home"):
        return what + " (configuration not recorded: an older version)"
    return f"{what} ({c['writer_backend']} / {c['model']}, home {c['home']}, v{c['version']})"


def flag_second_worker(settings: Settings) -> list[dict[str, Any]]:
    """Another worker already runs on this home of this host: log it and record an error.

    Called once at a worker's start-up. Both keep running (stopping one is a person's
    call), but nobody is left to find out by accident: ``status``, ``doctor`` and
    ``errors`` name both processes.

    Args:
        settings: This worker's settings (its home and ledger).

    Returns:
        The workers on this home (this one included) when there is more than one, else ``[]``.
    """
    import structlog

    from .ledger import control
    from .ledger.db import session_scope
    from .ledger.models import utcnow

    now = utcnow()
    with session_scope(settings.db_url) as session:
        rows = control.heartbeats_since(session, now - STALE)
    groups = duplicate_workers(live_consumers(rows, now=now))
    mine = [g for g in groups if any(c["pid"] == os.getpid() for c in g)]
    if not mine:
        return []
    group = mine[0]
    text = f"{len(group)} workers on home {settings.home}: " + "; ".join(map(describe, group))
    structlog.get_logger("reflect_jobs.consumers").warning("second_worker", detail=text)
    with session_scope(settings.db_url) as session:
        control.record_error(
            session, kind="second_worker", message=text, severity="warn", source="worker"
        )
    return group
