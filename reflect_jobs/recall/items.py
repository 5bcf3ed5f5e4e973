"""The repository's open reflection items, read cheaply for the session-start block (stdlib).

The SessionStart hook must stay a few interpreter start-ups fast (ARCHITECTURE §13) whatever
the size of the logs, so it does not import the reflection store. It finds the repository
and its memory home with :mod:`reflect_jobs.repo` and :mod:`reflect_jobs.repo_home` (stdlib, reads ``.git`` files
only), stats the host logs exactly as the index's own refresh does, and answers from the
last committed index read-only with the same query as ``Store.context`` (open, not stale,
a person's or a skill's handoffs first, then newest first).

When the logs changed behind the index's back (a git pull of another machine's log) it
indexes the change itself only within a small budget (:data:`BUDGET_BYTES` of unread log,
one second, never waiting for another refresh); beyond it, it leaves a request for the
worker (:mod:`reflect_jobs.reflections.requests`, ``tasks.refresh_reflections``) and tells
what the index holds — possibly a little stale, never a session start that a 100,000-event
log makes slower than the harness's timeout.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from reflect_jobs.reflections.logscan import leads_sql, scan_logs

if TYPE_CHECKING:
    from datetime import datetime

#: Open items shown at most (the CLI's ``reflections list`` shows the rest).
MAX_ITEMS = 10
#: Unread log bytes a reader indexes itself (a few hundred events); more is the worker's.
BUDGET_BYTES = 64 * 1024
#: Seconds of indexing a reader allows itself within that budget.
BUDGET_SEC = 1.0
#: The ages after which an open item reads stale (as ``reflections/fold.py:STALE_AFTER``).
_STALE_DAYS = {"reflector": 7, "person": 30, "skill": 30}
#: The newest open items a reader looks at (by creation). The block shows ten and the
#: count of the rest: its work stays bounded however many items a log brings (an index of
#: 500,000 open items would otherwise be walked at every session start).
SCAN_CAP = 2000
_COLUMNS = "i.id, i.kind, i.title, i.body, i.by, i.created_at, i.updated_at"
#: The newest open items, walked in the ``items_open`` index alone (no row is read).
_RECENT = (
    "(SELECT rowid AS r, created_at, uid, kind, by, updated_at FROM items"
    " WHERE repo = ? AND base = 'open' ORDER BY created_at DESC, uid DESC LIMIT ?) s"
)
_FRESH = "s.updated_at >= CASE s.by WHEN 'person' THEN ? WHEN 'skill' THEN ? ELSE ? END"
#: The items that lead the list: handoffs a person or a skill wrote (``logscan.leads_sql``).
_LEADS = leads_sql("s.")


def _cutoffs(now: datetime) -> dict[str, str]:
    """Per author, the timestamp before which an open item is stale (the logs' format)."""
    from datetime import timedelta

    return {
        by: (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for by, days in _STALE_DAYS.items()
    }


def _query(
    conn: Any, key: str, now: datetime, limit: int, counts: dict[str, Any] | None = None
) -> tuple[list[dict[str, str]], int]:
    """Fresh open items of ``key`` in context order, and how many there are.

    Both are read from the :data:`SCAN_CAP` newest open items only (a bounded index walk);
    ``counts`` (when given) gets ``"handoffs"``, how many of them are handoffs.
    """
    c = _cutoffs(now)
    args = (key, SCAN_CAP, c["person"], c["skill"], c["reflector"])
    total = int(conn.execute(f"SELECT count(*) FROM {_RECENT} WHERE {_FRESH}", args).fetchone()[0])
    if counts is not None:
        counts["handoffs"] = int(
            conn.execute(
                f"SELECT count(*) FROM {_RECENT} WHERE {_FRESH} AND s.kind = 'handoff'", args
            ).fetchone()[0]
        )
    out: list[dict[str, str]] = []
    for handoffs in (True, False):
        if len(out) >= limit or len(out) >= total:
            break
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM {_RECENT} JOIN items i ON i.rowid = s.r"
            f" WHERE {_FRESH} AND {'' if handoffs else 'NOT '}({_LEADS})"
            " ORDER BY s.created_at DESC, s.uid DESC LIMIT ?",
            (*args, limit - len(out)),
        )
        names = ("id", "kind", "title", "body", "by", "created_at", "updated_at")
        out += [dict(zip(names, r, strict=True)) for r in rows]
    return out, total


def _stored(conn: Any, key: str) -> dict[str, tuple[int, int, int, int]]:
    """The index's record of each log: ``(size, mtime_ns, inode, offset read up to)``."""
    rows = conn.execute(
        "SELECT path, size, mtime_ns, inode, offset FROM logs WHERE repo = ?", (key,)
    )
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


def _unread(
    stored: dict[str, tuple[int, int, int, int]], current: dict[str, tuple[int, int, int]]
) -> int:
    """Bytes of the logs the index has not read (a log it cannot continue counts whole)."""
    total = 0
    for path, (size, _mtime, inode) in current.items():
        old = stored.get(path)
        if old is not None and old[2] == inode and 0 <= old[3] <= size:
            total += size - old[3]
        else:
            total += size
    return total


def _refresh_within_budget(index: str, key: str, log_dir: Any, env: dict[str, str]) -> bool:
    """Index a small change now (never waiting for another refresh); True when it finished."""
    import sqlite3
    import time
    from pathlib import Path

    from reflect_jobs.reflections.events import host_name
    from reflect_jobs.reflections.index import ReflectionIndex

    idx = ReflectionIndex(Path(index))
    try:
        stats = idx.refresh(
            key,
            Path(log_dir),
            own=host_name(env),
            deadline=time.monotonic() + BUDGET_SEC,
            blocking=False,
        )
        return stats.complete
    except sqlite3.DatabaseError:
        idx.reset()  # derived data: the worker rebuilds it from the logs
        return False
    finally:
        idx.close()


def _may_have_items(env: dict[str, str]) -> bool:
    """Whether any memory home can exist: a mapping file, or the default ``repos/`` directory.

    Two ``stat`` calls that spare a machine which never used the reflection store reading
    its memory-home mapping and hashing a directory name on every session start.
    """
    from reflect_jobs.envpaths import kb_root_str, memory_homes_str

    if os.path.exists(memory_homes_str(env)):
        return True
    return os.path.isdir(os.path.join(kb_root_str(env), "repos"))


def open_items(
    cwd: object,
    environ: dict[str, str] | None = None,
    *,
    limit: int = MAX_ITEMS,
    now: datetime | None = None,
    counts: dict[str, Any] | None = None,
) -> tuple[str | None, list[dict[str, str]], int]:
    """The open (not stale) items of the repository holding ``cwd``.

    Args:
        cwd: The session's working directory (anything but a string means none).
        environ: The environment (``REFLECT_HOME``, ``GLOBAL_LEARNINGS_PATH``,
            ``REFLECT_MEMORY_HOMES``); ``None`` means ``os.environ``.
        limit: At most this many items.
        now: The reading time (staleness); ``None`` for now.
        counts: When given, filled with ``"handoffs"`` (open handoffs), ``"log_dir"`` and
            ``"logs"`` (the stat scan the answer was read against: the status line's cache
            key, ``statusline.py``) once the repository has logs.

    Returns:
        ``(repo_key, items, total_open)``: items as ``{"id", "kind", "title", "body", "by",
        "created_at", "updated_at"}``, a person's or a skill's handoffs first, then newest
        first (both among the :data:`SCAN_CAP` newest open items); ``(None, [], 0)`` outside a repository,
        ``(key, [], 0)`` when it has no logs. A home with logs and no label yet is labelled
        with the key (:func:`reflect_jobs.repo_home.record_key`).

    Raises:
        sqlite3.Error: The index is locked past its timeout or damaged.
        reflect_jobs.repo.RepoError: The memory-home mapping file is bad.
    """
    if not isinstance(cwd, str) or not cwd:
        return None, [], 0
    from reflect_jobs.envpaths import environ as merged_environ
    from reflect_jobs.envpaths import home_dir_str

    env = merged_environ(environ)
    if not _may_have_items(env):
        return None, [], 0
    from reflect_jobs.repo import repo_for
    from reflect_jobs.repo_home import memory_home, record_key

    found = repo_for(os.path.abspath(cwd))
    if found is None or not found.in_git or found.root is None:
        return None, [], 0
    key, home = found.key, memory_home(found, env)
    log_dir = os.path.join(home, "reflections")
    current = scan_logs(log_dir)
    if counts is not None:
        counts.update(log_dir=log_dir, logs=current, handoffs=0)
    if not current:
        return key, [], 0
    record_key(found.at(home))
    from datetime import UTC, datetime

    when = now or datetime.now(UTC)
    reflect_home = home_dir_str(env)
    index = os.path.join(reflect_home, "reflections-index.db")
    import sqlite3

    stored: dict[str, tuple[int, int, int, int]] = {}
    if os.path.isfile(index):
        conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=0.25)
        try:
            stored = _stored(conn, key)
            fresh = {p: s[:3] for p, s in stored.items()} == current and (
                conn.execute("SELECT 1 FROM dirty WHERE repo = ? LIMIT 1", (key,)).fetchone()
                is None
            )
            if fresh:
                items, total = _query(conn, key, when, limit, counts)
                return key, items, total
        except sqlite3.OperationalError:
            stored = {}  # no tables yet, or an index of an older schema
        finally:
            conn.close()
    # The logs changed since the index last saw them (or there is no index): index a small
    # change now; leave a big one to the worker and tell what the index holds.
    done = _unread(stored, current) <= BUDGET_BYTES and _refresh_within_budget(
        index, key, log_dir, env
    )
    if not done:
        from reflect_jobs.reflections.requests import request_refresh

        request_refresh(reflect_home, key, str(log_dir))
    if not os.path.isfile(index):
        return key, [], 0
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=0.25)
    try:
        items, total = _query(conn, key, when, limit, counts)
    except sqlite3.OperationalError:
        return key, [], 0  # an index that has no tables yet
    finally:
        conn.close()
    return key, items, total
