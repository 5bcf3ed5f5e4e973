"""The index's first half: read host logs into ``events``, streamed and committed in chunks.

:func:`plan` decides per log whether it is unchanged, grew (read from the stored offset) or
must be read again; :func:`ingest` streams one log with :func:`~.logscan.iter_lines` and
commits every :data:`CHUNK_LINES` lines its events, the items they touch (``dirty``, folded
by :mod:`.index_fold`) and the log's progress, in one transaction. Each line is checked
here: a line of ``<host>.jsonl`` claiming another host, an event id another line already
holds, an invalid line and a line over 64 KiB are counted per log and not indexed; a time
more than 5 minutes ahead of the moment the line is read is clamped (docs/REFLECTIONS.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from reflect_jobs.fsio import open_regular

from .events import MAX_LINE_BYTES, EventError, format_ts, parse_line
from .fold import clamp_future
from .index_schema import COUNTERS, TAIL
from .logscan import iter_lines

__all__ = ["CHUNK_LINES", "RefreshStats", "forget_log", "ingest", "plan", "stored", "tx"]

#: Lines of a log read per transaction.
CHUNK_LINES = 5000


@dataclass
class RefreshStats:
    """What one refresh did: logs read, events added, items folded, lines not folded.

    ``complete`` is False when the refresh stopped early (its ``deadline``, or another
    process holding the refresh lock with ``blocking=False``); what it did is committed.
    """

    changed: bool = False
    logs_read: int = 0
    events: int = 0
    items: int = 0
    bad_lines: int = 0
    other_host: int = 0
    reused: int = 0
    oversize: int = 0
    future: int = 0
    complete: bool = True
    warnings: list[str] = field(default_factory=list)


def _tail_hash(fh: Any, offset: int) -> str:
    start = max(0, offset - TAIL)
    return hashlib.sha256(os.pread(fh.fileno(), offset - start, start)).hexdigest()[:32]


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def stored(conn: sqlite3.Connection, repo: str) -> dict[str, tuple[Any, ...]]:
    """What the index last saw of each log of ``repo``.

    Args:
        conn: The index connection.
        repo: The repo key.

    Returns:
        ``path -> (size, mtime_ns, inode, offset, tail, *COUNTERS)``.
    """
    rows = conn.execute(
        f"SELECT path, size, mtime_ns, inode, offset, tail, {', '.join(COUNTERS)}"
        " FROM logs WHERE repo = ?",
        (repo,),
    )
    return {r[0]: tuple(r[1:]) for r in rows}


def plan(
    current: dict[str, tuple[int, int, int]],
    seen: dict[str, tuple[Any, ...]],
    stats: RefreshStats,
) -> dict[str, set[str]]:
    """Which logs are unchanged, which are forgotten, which are read again from the start.

    A log whose bytes before the stored offset still hash the same grew (or git replaced
    it by a longer copy) and is read from that offset; any other change is read again. When
    a log is forgotten or read again, every log that reused one of its event ids is read
    again too: the event that counts may now be that log's.

    Args:
        current: :func:`~.logscan.scan_logs` now.
        seen: :func:`stored`.
        stats: Where an unreadable log is reported.

    Returns:
        ``{"forget": paths, "skip": paths, "reread": paths}`` (``forget`` includes
        ``reread``: their events go before they are read again).
    """
    forget = set(seen) - set(current)
    skip = {p for p in current if p in seen and seen[p][:3] == current[p]}
    reread: set[str] = set()
    for path in set(current) - skip:
        old = seen.get(path)
        if old is None:
            continue
        try:
            with open_regular(path, follow=False) as fh:  # never through a link
                size = os.fstat(fh.fileno()).st_size
                grown = size >= old[3] and _tail_hash(fh, old[3]) == old[4]
        except OSError as exc:
            stats.warnings.append(f"cannot read {path}: {exc.strerror}")
            skip.add(path)
            continue
        if not grown:
            reread.add(path)
    if forget or reread:
        # an event a forgotten log held may now belong to a log that reused its id
        reused = {p for p, old in seen.items() if old[7] and p in current}
        reread |= reused
        skip -= reused
    forget |= reread
    return {"forget": forget, "skip": skip, "reread": reread}


def tx(conn: sqlite3.Connection, body: Any) -> Any:
    """Run ``body()`` in one ``BEGIN IMMEDIATE`` transaction (rolled back if it raises).

    Args:
        conn: A connection in autocommit mode.
        body: The work.

    Returns:
        What ``body`` returned.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        out = body()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return out


def forget_log(conn: sqlite3.Connection, repo: str, path: str) -> None:
    """Drop a log's events and record (its items are marked to be folded again).

    Args:
        conn: The index connection, inside a transaction.
        repo: The repo key.
        path: The log.
    """
    conn.execute(
        "INSERT OR IGNORE INTO dirty (repo, uid)"
        " SELECT DISTINCT repo, uid FROM events WHERE repo = ? AND path = ?",
        (repo, path),
    )
    conn.execute("DELETE FROM events WHERE repo = ? AND path = ?", (repo, path))
    conn.execute("DELETE FROM logs WHERE repo = ? AND path = ?", (repo, path))


def ingest(
    conn: sqlite3.Connection,
    repo: str,
    path: str,
    old: tuple[Any, ...] | None,
    stats: RefreshStats,
    now: datetime,
    deadline: float | None,
) -> bool:
    """Read one log from its stored offset in committed chunks.

    Args:
        conn: The index connection (autocommit mode).
        repo: The repo key.
        path: The host log.
        old: Its stored record when it grew (read from its offset), or ``None`` (from 0).
        stats: Counted into; warnings name what was ignored or skipped.
        now: The reading time (the future bound, ``seen``).
        deadline: A ``time.monotonic()`` value, or ``None``.

    Returns:
        False when the deadline stopped it between chunks (what it read is committed).
    """
    try:
        # a regular file, never through a link (a synced home's log is anyone's)
        fh = open_regular(path, follow=False)
    except OSError as exc:
        stats.warnings.append(f"cannot read {path}: {exc.strerror}")
        return True
    with fh:
        st = os.fstat(fh.fileno())
        offset, counts = 0, dict.fromkeys(COUNTERS, 0)
        if old is not None:  # plan() checked that the bytes before the offset are unchanged
            offset = old[3]
            counts = dict(zip(COUNTERS, old[5:10], strict=True))
        stem, seen, before = Path(path).stem, format_ts(now), dict(counts)
        rows: list[tuple[str, ...]] = []
        lines = 0
        pos = offset
        for raw, after in iter_lines(fh, offset, st.st_size, MAX_LINE_BYTES):
            pos, lines = after, lines + 1
            if raw is None:
                counts["oversize"] += 1
            elif raw.strip():
                row = _row(repo, path, raw, stem, seen, now, counts)
                if row is not None:
                    rows.append(row)
            if lines >= CHUNK_LINES:
                _commit(conn, repo, path, fh, st, pos, rows, counts, stats, final=False)
                rows, lines = [], 0
                if _expired(deadline):
                    stats.logs_read += 1
                    return False
        _commit(conn, repo, path, fh, st, pos, rows, counts, stats, final=True)
    stats.logs_read += 1
    new = {k: counts[k] - before[k] for k in COUNTERS}
    stats.bad_lines += new["bad"]
    stats.other_host += new["other_host"]
    stats.reused += new["reused"]
    stats.oversize += new["oversize"]
    stats.future += new["future"]
    for key, what in (
        ("bad", "invalid line(s)"),
        ("other_host", "event(s) claiming another host"),
        ("reused", "event(s) reusing an event id"),
        ("oversize", f"line(s) over {MAX_LINE_BYTES // 1024} KiB"),
    ):
        if new[key]:
            verb = "skipped" if key in ("bad", "oversize") else "ignored"
            stats.warnings.append(f"{verb} {new[key]} {what} in {path}")
    return True


def _events_of(conn: sqlite3.Connection, repo: str, path: str) -> int:
    row = conn.execute(
        "SELECT events FROM logs WHERE repo = ? AND path = ?", (repo, path)
    ).fetchone()
    return int(row[0]) if row else 0


def _row(
    repo: str,
    path: str,
    raw: bytes,
    stem: str,
    seen: str,
    now: datetime,
    counts: dict[str, int],
) -> tuple[str, ...] | None:
    """One line as an ``events`` row, or None (counted) when it does not count."""
    try:
        event = parse_line(raw.decode("utf-8"))
    except (EventError, UnicodeDecodeError, RecursionError):
        counts["bad"] += 1
        return None
    if event["host"] != stem:  # <host>.jsonl speaks only for <host>
        counts["other_host"] += 1
        return None
    capped = clamp_future(event["ts"], now)
    if capped != event["ts"]:
        counts["future"] += 1
        event["claimed_ts"], event["ts"] = event["ts"], capped
    line = json.dumps(event, ensure_ascii=False)
    return (
        repo,
        event["eid"],
        path,
        event["uid"],
        event["ts"],
        event["op"],
        event["host"],
        seen,
        line,
    )


def _commit(
    conn: sqlite3.Connection,
    repo: str,
    path: str,
    fh: Any,
    st: os.stat_result,
    pos: int,
    rows: list[tuple[str, ...]],
    counts: dict[str, int],
    stats: RefreshStats,
    *,
    final: bool,
) -> int:
    """One chunk: its events, their items marked dirty, the log's progress — atomically.

    A chunk that is not the last stores size -1, so a refresh stopped here finds the log
    changed and goes on from ``pos``.
    """
    tail = _tail_hash(fh, pos)

    def body() -> int:
        cur = conn.executemany(
            "INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
        )
        added = max(cur.rowcount, 0)
        counts["reused"] += len(rows) - added
        conn.executemany(
            "INSERT OR IGNORE INTO dirty (repo, uid) VALUES (?, ?)",
            [(repo, r[3]) for r in rows],
        )
        total = _events_of(conn, repo, path) + added
        conn.execute(
            "INSERT OR REPLACE INTO logs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                repo,
                path,
                st.st_size if final else -1,
                st.st_mtime_ns,
                st.st_ino,
                pos,
                tail,
                *(counts[k] for k in COUNTERS),
                total,
            ),
        )
        return added

    added = int(tx(conn, body))
    stats.events += added
    return added
