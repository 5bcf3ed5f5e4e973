"""The index's second half: fold the items marked ``dirty`` again, in bounded batches.

A refresh marks every item whose events changed (:mod:`.index`); this folds them
:data:`FOLD_BATCH` at a time, one transaction each, streaming each item's events from SQLite
in the fold's order (:func:`~.fold.sort_key` over the clamped times of
:func:`~.fold.effective_ts`) into a :class:`~.fold.Folder`. Memory is one batch of item
states, whatever the size of the logs. Ids (:func:`~.fold.unique_id`) are recomputed for the
neighbours of the items that appeared or went away, or — after a bulk load — in one
streamed pass over the sorted uids.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from .fold import Folder, Item, after_creation, unique_id
from .index_schema import _COLUMNS

FOLD_BATCH = 1000
#: More dirty items than this (and a tenth of the repository) is a bulk load: ids are
#: recomputed in one pass at the end rather than around each item.
BULK = 5000
_PAGE = 5000

__all__ = ["FOLD_BATCH", "refold", "renumber"]


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def refold(conn: sqlite3.Connection, repo: str, stats: Any, deadline: float | None) -> bool:
    """Fold every dirty item of ``repo`` again; False when ``deadline`` stopped it first.

    Args:
        conn: The index connection (autocommit mode: transactions are explicit here).
        repo: The repo key.
        stats: The refresh's :class:`~.index.RefreshStats` (``items`` is counted).
        deadline: A ``time.monotonic()`` value, or ``None``.

    Returns:
        True when nothing is left dirty.
    """
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS _batch (uid TEXT PRIMARY KEY, first TEXT,"
        " floor TEXT, seen TEXT)"
    )
    dirty = conn.execute("SELECT count(*) FROM dirty WHERE repo = ?", (repo,)).fetchone()[0]
    if not dirty:
        return True
    present = conn.execute("SELECT count(*) FROM items WHERE repo = ?", (repo,)).fetchone()[0]
    bulk = dirty > max(BULK, present // 10)
    membership = False
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            uids = [
                r[0]
                for r in conn.execute(
                    "SELECT uid FROM dirty WHERE repo = ? ORDER BY uid LIMIT ?",
                    (repo, FOLD_BATCH),
                )
            ]
            if not uids:
                conn.execute("COMMIT")
                break
            changed = _fold_batch(conn, repo, uids, stats)
            membership = membership or bool(changed)
            if changed and not bulk:
                _renumber_around(conn, repo, changed)
            conn.executemany(
                "DELETE FROM dirty WHERE repo = ? AND uid = ?", [(repo, u) for u in uids]
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if _expired(deadline):
            if bulk and membership:
                renumber(conn, repo)
            return (
                conn.execute("SELECT 1 FROM dirty WHERE repo = ? LIMIT 1", (repo,)).fetchone()
                is None
            )
    if bulk and membership:
        renumber(conn, repo)
    return True


def _fold_batch(conn: sqlite3.Connection, repo: str, uids: list[str], stats: Any) -> list[str]:
    """Fold ``uids`` (inside the caller's transaction); returns those that appeared or went."""
    conn.execute("DELETE FROM _batch")
    conn.executemany("INSERT INTO _batch (uid) VALUES (?)", [(u,) for u in uids])
    firsts = conn.execute(
        "SELECT e.uid, min(e.ts), min(e.seen) FROM _batch b CROSS JOIN events e"
        " ON e.repo = ? AND e.uid = b.uid AND e.op = 'add' GROUP BY e.uid",
        (repo,),
    ).fetchall()
    conn.executemany(
        "UPDATE _batch SET first = ?, floor = ?, seen = ? WHERE uid = ?",
        [(first, after_creation(first), seen, uid) for uid, first, seen in firsts],
    )
    rows = conn.execute(
        "SELECT e.uid, e.line, b.seen,"
        " CASE WHEN e.op != 'add' AND e.ts <= b.first THEN b.floor ELSE e.ts END AS k"
        " FROM _batch b CROSS JOIN events e ON e.repo = ? AND e.uid = b.uid"
        " WHERE b.first IS NOT NULL"
        " ORDER BY e.uid, k, e.ts, e.host, e.op != 'add', e.eid",
        (repo,),
    )
    changed: list[str] = []
    folded: set[str] = set()
    pending: list[tuple[Item, str]] = []
    uid, folder, seen = None, Folder(), ""
    for row_uid, line, row_seen, key in rows:  # streamed: one item's state at a time
        if row_uid != uid:
            if uid is not None:
                pending.append((folder.result(), seen))  # type: ignore[arg-type]
            uid, folder, seen = row_uid, Folder(), row_seen
        event = json.loads(line)
        event["ts"] = key
        folder.feed(event)
    if uid is not None:
        pending.append((folder.result(), seen))  # type: ignore[arg-type]
    for item, item_seen in pending:
        folded.add(item.uid)
        if _write_item(conn, repo, item, item_seen):
            changed.append(item.uid)
        stats.items += 1
    for gone in set(uids) - folded:
        row = conn.execute(
            "SELECT rid FROM items WHERE repo = ? AND uid = ?", (repo, gone)
        ).fetchone()
        if row is not None:
            conn.execute("DELETE FROM items_fts WHERE rowid = ?", (row[0],))
            conn.execute("DELETE FROM items WHERE rid = ?", (row[0],))
            changed.append(gone)
    return changed


def _write_item(conn: sqlite3.Connection, repo: str, item: Item, seen: str) -> bool:
    """Insert or update one folded item and its FTS row; True when it is new."""
    row = conn.execute(
        "SELECT rid FROM items WHERE repo = ? AND uid = ?", (repo, item.uid)
    ).fetchone()
    notes = json.dumps(item.notes, ensure_ascii=False)
    values = (
        item.kind,
        item.title,
        item.body,
        item.base,
        item.by,
        item.session,
        item.host,
        item.created_at,
        item.updated_at,
        notes,
        seen,
    )
    if row is None:
        cur = conn.execute(
            f"INSERT INTO items (repo, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (repo, item.uid, "#" + item.uid, *values),
        )
        rid = cur.lastrowid
    else:
        rid = row[0]
        conn.execute("DELETE FROM items_fts WHERE rowid = ?", (rid,))
        conn.execute(
            "UPDATE items SET kind=?, title=?, body=?, base=?, by=?, session=?, host=?,"
            " created_at=?, updated_at=?, notes=?, seen=? WHERE rid = ?",
            (*values, rid),
        )
    conn.execute(
        "INSERT INTO items_fts (rowid, title, body, notes) VALUES (?, ?, ?, ?)",
        (rid, item.title, item.body, "\n".join(n["text"] for n in item.notes)),
    )
    return row is None


def _neighbour(conn: sqlite3.Connection, repo: str, uid: str, before: bool) -> str | None:
    op, order = ("<", "DESC") if before else (">", "ASC")
    row = conn.execute(
        f"SELECT uid FROM items WHERE repo = ? AND uid {op} ? ORDER BY uid {order} LIMIT 1",
        (repo, uid),
    ).fetchone()
    return row[0] if row else None


def _renumber_around(conn: sqlite3.Connection, repo: str, changed: list[str]) -> None:
    """Recompute the ids an appearing or vanishing uid can change: its own and its neighbours'."""
    affected: set[str] = set()
    for uid in changed:
        affected.update(
            u
            for u in (uid, _neighbour(conn, repo, uid, True), _neighbour(conn, repo, uid, False))
            if u is not None
        )
    for uid in sorted(affected):
        row = conn.execute(
            "SELECT id FROM items WHERE repo = ? AND uid = ?", (repo, uid)
        ).fetchone()
        if row is None:
            continue
        new = unique_id(uid, _neighbour(conn, repo, uid, True), _neighbour(conn, repo, uid, False))
        if new != row[0]:
            conn.execute("UPDATE items SET id = ? WHERE repo = ? AND uid = ?", (new, repo, uid))


def renumber(conn: sqlite3.Connection, repo: str) -> None:
    """Recompute every id of ``repo`` in one pass over the sorted uids (pages of 5,000).

    Args:
        conn: The index connection.
        repo: The repo key.
    """
    last, before = "", None
    while True:
        page = conn.execute(
            "SELECT uid, id FROM items WHERE repo = ? AND uid > ? ORDER BY uid LIMIT ?",
            (repo, last, _PAGE + 1),
        ).fetchall()
        if not page:
            return
        updates = []
        for i, (uid, old) in enumerate(page[:_PAGE]):
            after = page[i + 1][0] if i + 1 < len(page) else None
            new = unique_id(uid, before, after)
            if new != old:
                updates.append((new, repo, uid))
            before = uid
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("UPDATE items SET id = ? WHERE repo = ? AND uid = ?", updates)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if len(page) <= _PAGE:
            return
        last = page[_PAGE - 1][0]
