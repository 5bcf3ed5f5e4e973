"""The hook's failures, read back from ``$REFLECT_HOME/hook-errors.log`` for people to see.

The hook must never fail a session, so a missing transcript, a malformed payload or a broken
config file only becomes a line in ``hook-errors.log`` (``hook.log_error``). Nobody reads a
log file: ``status`` counts the last 24 hours (``--json``: ``hook_errors``), ``errors``,
``doctor`` and the dashboard list them, grouped like the errors ledger's rows, from here.
The log is read newest first and only as far back as the window, so a shell prompt calling
``status --line`` stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LOG_NAME = "hook-errors.log"
WINDOW = timedelta(hours=24)


def _lines_newest_first(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[::-1]
    except OSError:
        return []


def recent(
    home: Path, *, now: datetime | None = None, window: timedelta = WINDOW
) -> list[dict[str, Any]]:
    """The hook errors logged within ``window``, newest first.

    Args:
        home: ``$REFLECT_HOME``.
        now: The current time (UTC; tests pin it).
        window: How far back.

    Returns:
        ``{"at": datetime, "error": str}`` per line; a line that is not ours is skipped.
    """
    now = now or datetime.now(UTC)
    cutoff = now - window
    out: list[dict[str, Any]] = []
    for name in (LOG_NAME, LOG_NAME + ".1"):  # the current log, then its one old generation
        for line in _lines_newest_first(home / name):
            try:
                rec = json.loads(line)
                at = datetime.strptime(rec["ts"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                error = str(rec["error"])
            except (ValueError, KeyError, TypeError):
                continue
            if at < cutoff:
                return out
            out.append({"at": at, "error": error})
    return out


def count(home: Path, *, now: datetime | None = None) -> int:
    """How many hook errors were logged in the last 24 hours.

    Args:
        home: ``$REFLECT_HOME``.
        now: The current time (UTC).

    Returns:
        The count (0 without a log).
    """
    return len(recent(home, now=now))


def as_error_rows(home: Path, *, now: datetime | None = None) -> list[dict[str, Any]]:
    """The last 24 hours' hook errors in the errors ledger's row shape, one per message.

    Args:
        home: ``$REFLECT_HOME``.
        now: The current time (UTC).

    Returns:
        ``{"id": "hook-<6 hex>", "severity": "error", "source": "hook", "kind":
        "hook_error", "count", "last_at", "message", "acked": False}``, most recent first.
        They cannot be acknowledged: they leave the list 24 hours after the last one.
    """
    rows: dict[str, dict[str, Any]] = {}
    for e in recent(home, now=now):
        message = e["error"][:500]
        row = rows.get(message)
        if row is None:
            rows[message] = {
                "id": "hook-" + hashlib.sha1(message.encode()).hexdigest()[:6],
                "severity": "error",
                "source": "hook",
                "kind": "hook_error",
                "count": 1,
                "last_at": e["at"].isoformat(),
                "message": message,
                "acked": False,
            }
        else:
            row["count"] += 1
    return list(rows.values())


def log_path(home: Path) -> str:
    """Where the hook logs (for the one line that points at it).

    Args:
        home: ``$REFLECT_HOME``.

    Returns:
        The log's path.
    """
    return os.fspath(home / LOG_NAME)
