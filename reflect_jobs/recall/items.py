"""The repository's open reflection items, read cheaply for the session-start block (stdlib).

The SessionStart hook must stay a few interpreter start-ups fast (ARCHITECTURE §13), so it
does not import the reflection store (its index module pulls the KB's lexical index, its
events module the redaction rules). It finds the repository and its memory home with
:mod:`reflect_jobs.repo` and :mod:`reflect_jobs.repo_home` (stdlib, reads ``.git`` files only), stats the host logs
exactly as the index's own refresh does, and when the index already matches them — the
common case: every write goes through a command that refreshes — answers from the index
read-only with the same query as ``Store.context`` (open, not stale, handoffs first, then
newest first). Only when the logs changed behind the index's back (a git pull of another
machine's log) or there is no index yet does it pay for the full store and its refresh, so
what a session is told is never older than the logs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from reflect_jobs.reflections.logscan import scan_logs

if TYPE_CHECKING:
    from datetime import datetime

#: Open items shown at most (the CLI's ``reflections list`` shows the rest).
MAX_ITEMS = 10
#: The ages after which an open item reads stale (as ``reflections/fold.py:STALE_AFTER``).
_STALE_DAYS = {"reflector": 7, "person": 30, "skill": 30}
_COLUMNS = "id, kind, title, body, by, created_at, updated_at"
_WHERE = (
    "repo = ? AND base = 'open' AND updated_at >= "
    "CASE by WHEN 'person' THEN ? WHEN 'skill' THEN ? ELSE ? END"
)


def _cutoffs(now: datetime) -> dict[str, str]:
    """Per author, the timestamp before which an open item is stale (the logs' format)."""
    from datetime import timedelta

    return {
        by: (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for by, days in _STALE_DAYS.items()
    }


def _query(conn: Any, key: str, now: datetime, limit: int) -> tuple[list[dict[str, str]], int]:
    """Fresh open items of ``key`` in context order, and how many there are."""
    c = _cutoffs(now)
    args = (key, c["person"], c["skill"], c["reflector"])
    total = int(conn.execute(f"SELECT count(*) FROM items WHERE {_WHERE}", args).fetchone()[0])
    out: list[dict[str, str]] = []
    for handoffs in (True, False):
        if len(out) >= limit:
            break
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE {_WHERE}"
            f" AND kind {'=' if handoffs else '!='} 'handoff'"
            " ORDER BY created_at DESC, uid DESC LIMIT ?",
            (*args, limit - len(out)),
        )
        names = ("id", "kind", "title", "body", "by", "created_at", "updated_at")
        out += [dict(zip(names, r, strict=True)) for r in rows]
    return out, total


def _matches(conn: Any, key: str, current: dict[str, tuple[int, int, int]]) -> bool:
    """Whether the index's stored log stats are exactly the logs on disk now."""
    rows = conn.execute("SELECT path, size, mtime_ns, inode FROM logs WHERE repo = ?", (key,))
    stored = {r[0]: (r[1], r[2], r[3]) for r in rows}
    return stored == current


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
) -> tuple[str | None, list[dict[str, str]], int]:
    """The open (not stale) items of the repository holding ``cwd``.

    Args:
        cwd: The session's working directory (anything but a string means none).
        environ: The environment (``REFLECT_HOME``, ``GLOBAL_LEARNINGS_PATH``,
            ``REFLECT_MEMORY_HOMES``); ``None`` means ``os.environ``.
        limit: At most this many items.
        now: The reading time (staleness); ``None`` for now.

    Returns:
        ``(repo_key, items, total_open)``: the key as people read it; items as ``{"id",
        "kind", "title", "body", "by", "created_at", "updated_at"}``, handoffs first then
        newest first; ``(None, [], 0)`` outside a repository, ``(key, [], 0)`` when it has
        no logs. A home with logs and no label yet is labelled with the key
        (:func:`reflect_jobs.repo_home.record_key`: one ``stat`` when it already is).


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
    root, key, home = found.root, found.key, memory_home(found, env)
    current = scan_logs(os.path.join(home, "reflections"))
    if not current:
        return key, [], 0
    record_key(found.at(home))
    from datetime import UTC, datetime

    when = now or datetime.now(UTC)
    index = os.path.join(home_dir_str(env), "reflections-index.db")
    import sqlite3

    if os.path.isfile(index):
        conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=0.25)
        try:
            if _matches(conn, key, current):
                items, total = _query(conn, key, when, limit)
                return key, items, total
        except sqlite3.OperationalError:
            pass  # no tables yet (a fresh file): the refresh below builds them
        finally:
            conn.close()
    # The logs changed since the index last saw them (or there is no index): refresh first.
    from reflect_jobs.reflections.store import open_store

    store = open_store(str(root), cwd, env)
    try:
        store.refresh()
    finally:
        store.close()
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=0.25)
    try:
        items, total = _query(conn, key, when, limit)
    finally:
        conn.close()
    return key, items, total
