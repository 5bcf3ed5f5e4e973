"""The derived SQLite FTS5 index of the reflection logs, refreshed by stat (never committed).

``$REFLECT_HOME/reflections-index.db`` (0600, WAL) holds, per repository, every valid event
line, the folded items with their derived ids, an FTS5 table over title, body and notes,
and what was last seen of each host log: size, mtime, inode, the offset read up to and a
hash of the 4 KiB before that offset. It can be deleted at any time; the next command
rebuilds it from the logs.

:meth:`ReflectionIndex.refresh` first stats the log directory and compares: when nothing
changed it costs a directory scan, a few ``stat`` calls and one small SELECT (about a
millisecond, bench/bench_reflections.py). A log whose bytes before the stored offset are
unchanged (the tail hash matches: it only grew, or git replaced it by a longer copy) is read
from that offset; any other change rereads that one log. Only the items whose events changed
are folded again (:func:`reflect_jobs.reflections.fold.fold_item`), and ids are recomputed
only when the set of items changed. A last line without its newline (a writer still
writing, or killed) is left for the next refresh. Invalid lines are skipped and counted,
never fatal: a log another tool wrote badly must not hide the good lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reflect_jobs.fsio import open_regular
from reflect_jobs.index.lexical import build_match

from .events import EventError, parse_line
from .fold import Item, abbreviate, fold_item
from .index_schema import _COLUMNS, _SCHEMA, _WEIGHTS, SCHEMA_VERSION, TAIL, _row_item
from .logscan import scan_logs

__all__ = ["RefreshStats", "ReflectionIndex", "index_path"]


def index_path(reflect_home: Path) -> Path:
    """Where the index lives: ``$REFLECT_HOME/reflections-index.db``.

    Args:
        reflect_home: The state directory.

    Returns:
        The database path.
    """
    return reflect_home / "reflections-index.db"


@dataclass
class RefreshStats:
    """What one refresh did: logs read, events added, items folded again, bad lines skipped."""

    changed: bool = False
    logs_read: int = 0
    events: int = 0
    items: int = 0
    bad_lines: int = 0
    warnings: list[str] = field(default_factory=list)


def _tail_hash(fh: Any, offset: int) -> str:
    start = max(0, offset - TAIL)
    fh.seek(start)
    return hashlib.sha256(fh.read(offset - start)).hexdigest()[:32]


class ReflectionIndex:
    """One SQLite file indexing the reflection logs of every repository used on this machine."""

    def __init__(self, path: Path) -> None:
        """Open (creating 0600, in a 0700 directory) the index; a damaged file is rebuilt.

        Args:
            path: The database file (:func:`index_path`).
        """
        self.path = path
        if not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError:  # derived data: start again from the logs
            self._remove_files()
            self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise sqlite3.DatabaseError(f"index schema {version}")
            if version == 0:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def reset(self) -> None:
        """Delete the index and start empty (it is derived: the next refresh refills it)."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._remove_files()
        self._conn = self._open()

    def __enter__(self) -> ReflectionIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- refresh -----------------------------------------------------------------------

    def _stored(self, repo: str) -> dict[str, tuple[Any, ...]]:
        rows = self._conn.execute(
            "SELECT path, size, mtime_ns, inode, offset, tail FROM logs WHERE repo = ?", (repo,)
        )
        return {r[0]: tuple(r[1:]) for r in rows}

    def refresh(self, repo: str, log_dir: Path) -> RefreshStats:
        """Bring the index of ``repo`` in line with its host logs; cheap when nothing changed.

        Args:
            repo: The repo key.
            log_dir: ``<memory home>/reflections``.

        Returns:
            What was read and folded.
        """
        stats = RefreshStats()
        current = scan_logs(log_dir)
        stored = self._stored(repo)
        if stored.keys() == current.keys() and all(stored[p][:3] == current[p] for p in current):
            return stats
        stats.changed = True
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            stored = self._stored(repo)  # another process may have refreshed meanwhile
            touched: set[str] = set()
            for path in stored.keys() - current.keys():
                touched |= self._forget_log(repo, path)
            for path, st in current.items():
                old = stored.get(path)
                if old is not None and old[:3] == st:
                    continue
                touched |= self._read_log(repo, path, old, stats)
            self._refold(repo, touched, stats)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return stats

    def _forget_log(self, repo: str, path: str) -> set[str]:
        uids = {
            r[0]
            for r in self._conn.execute(
                "SELECT DISTINCT uid FROM events WHERE repo = ? AND path = ?", (repo, path)
            )
        }
        self._conn.execute("DELETE FROM events WHERE repo = ? AND path = ?", (repo, path))
        self._conn.execute("DELETE FROM logs WHERE repo = ? AND path = ?", (repo, path))
        return uids

    def _read_log(
        self, repo: str, path: str, old: tuple[Any, ...] | None, stats: RefreshStats
    ) -> set[str]:
        touched: set[str] = set()
        try:  # a regular file, never through a link (a synced home's log is anyone's)
            fh = open_regular(path, follow=False)
        except OSError as exc:
            stats.warnings.append(f"cannot read {path}: {exc.strerror}")
            return touched
        with fh:
            st = os.fstat(fh.fileno())
            offset = 0
            if old is not None:
                old_offset, old_tail = old[3], old[4]
                if st.st_size >= old_offset and _tail_hash(fh, old_offset) == old_tail:
                    offset = old_offset
            if offset == 0 and old is not None:
                touched |= self._forget_log(repo, path)
            fh.seek(offset)
            data = fh.read()
            end = data.rfind(b"\n") + 1  # a last line without its newline waits
            rows = []
            bad = 0
            for raw in data[:end].splitlines():
                if not raw.strip():
                    continue
                try:
                    event = parse_line(raw.decode("utf-8"))
                except (EventError, UnicodeDecodeError):
                    bad += 1
                    continue
                rows.append((repo, path, event["eid"], event["uid"], json.dumps(event)))
                touched.add(event["uid"])
            self._conn.executemany("INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?)", rows)
            new_offset = offset + end
            tail = _tail_hash(fh, new_offset)
        prior_bad = 0 if offset == 0 or old is None else self._bad(repo, path)
        self._conn.execute(
            "INSERT OR REPLACE INTO logs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (repo, path, st.st_size, st.st_mtime_ns, st.st_ino, new_offset, tail, prior_bad + bad),
        )
        stats.logs_read += 1
        stats.events += len(rows)
        stats.bad_lines += bad
        if bad:
            stats.warnings.append(f"skipped {bad} invalid line(s) in {path}")
        return touched

    def _bad(self, repo: str, path: str) -> int:
        row = self._conn.execute(
            "SELECT bad FROM logs WHERE repo = ? AND path = ?", (repo, path)
        ).fetchone()
        return int(row[0]) if row else 0

    def _refold(self, repo: str, uids: Iterable[str], stats: RefreshStats) -> None:
        membership_changed = False
        for uid in uids:
            events = {
                e["eid"]: e
                for e in (
                    json.loads(r[0])
                    for r in self._conn.execute(
                        "SELECT line FROM events WHERE repo = ? AND uid = ?", (repo, uid)
                    )
                )
            }
            item = fold_item(events.values())
            row = self._conn.execute(
                "SELECT rid FROM items WHERE repo = ? AND uid = ?", (repo, uid)
            ).fetchone()
            if row is not None:
                self._conn.execute("DELETE FROM items_fts WHERE rowid = ?", (row[0],))
            if item is None:
                if row is not None:
                    self._conn.execute("DELETE FROM items WHERE rid = ?", (row[0],))
                    membership_changed = True
                continue
            notes = json.dumps(item.notes, ensure_ascii=False)
            values = (item.kind, item.title, item.body, item.base, item.by, item.session)
            values += (item.host, item.created_at, item.updated_at, notes)
            if row is None:
                cur = self._conn.execute(
                    f"INSERT INTO items (repo, {_COLUMNS}) VALUES (?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (repo, uid, *values),
                )
                rid = cur.lastrowid
                membership_changed = True
            else:
                rid = row[0]
                self._conn.execute(
                    "UPDATE items SET kind=?, title=?, body=?, base=?, by=?, session=?, host=?,"
                    " created_at=?, updated_at=?, notes=? WHERE rid = ?",
                    (*values, rid),
                )
            note_text = "\n".join(n["text"] for n in item.notes)
            self._conn.execute(
                "INSERT INTO items_fts (rowid, title, body, notes) VALUES (?, ?, ?, ?)",
                (rid, item.title, item.body, note_text),
            )
            stats.items += 1
        if membership_changed:
            rows = self._conn.execute(
                "SELECT uid, id FROM items WHERE repo = ?", (repo,)
            ).fetchall()
            ids = abbreviate(uid for uid, _ in rows)
            self._conn.executemany(
                "UPDATE items SET id = ? WHERE repo = ? AND uid = ?",
                [(ids[uid], repo, uid) for uid, old in rows if ids[uid] != old],
            )

    # -- reads ---------------------------------------------------------------------------

    def items(self, repo: str, bases: Iterable[str] | None = None) -> list[Item]:
        """The items of ``repo`` with one of the folded statuses ``bases``, newest first.

        Args:
            repo: The repo key.
            bases: Folded statuses (``open``, ``note``, ``done``, ``dropped``); ``None`` for all.

        Returns:
            The items (``stale`` is derived by the caller from ``base`` and ``updated_at``).
        """
        sql = f"SELECT {_COLUMNS} FROM items WHERE repo = ?"
        args: list[Any] = [repo]
        if bases is not None:
            wanted = list(bases)
            sql += f" AND base IN ({', '.join('?' * len(wanted))})"
            args += wanted
        sql += " ORDER BY created_at DESC, uid DESC"
        return [_row_item(r) for r in self._conn.execute(sql, args)]

    def fresh_open(self, repo: str, cutoffs: dict[str, str], limit: int) -> tuple[list[Item], int]:
        """Open items that are not stale, handoffs first then newest, and how many there are.

        What ``context`` needs at a session start, without reading every item: its cost
        follows ``limit``, not the size of the store.

        Args:
            repo: The repo key.
            cutoffs: Per author (``reflector``, ``person``, ``skill``), the timestamp before
                which an open item is stale (:func:`reflect_jobs.reflections.fold.stale_cutoffs`).
            limit: At most this many items.

        Returns:
            The first ``limit`` items in that order, and the number of open, fresh items.
        """
        where = (
            "repo = ? AND base = 'open' AND updated_at >= "
            "CASE by WHEN 'person' THEN ? WHEN 'skill' THEN ? ELSE ? END"
        )
        args = (repo, cutoffs["person"], cutoffs["skill"], cutoffs["reflector"])
        total = self._conn.execute(f"SELECT count(*) FROM items WHERE {where}", args).fetchone()[0]
        out: list[Item] = []
        for handoffs in (True, False):  # two index walks (newest first) instead of one sort
            if len(out) >= limit:
                break
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE {where}"
                f" AND kind {'=' if handoffs else '!='} 'handoff'"
                " ORDER BY created_at DESC, uid DESC LIMIT ?",
                (*args, int(limit) - len(out)),
            )
            out += [_row_item(r) for r in rows]
        return out, int(total)

    def search(self, repo: str, query: str, k: int = 20) -> list[tuple[Item, float]]:
        """Items of ``repo`` matching ``query`` (title, body and notes; BM25), best first.

        Args:
            repo: The repo key.
            query: Free text; no character of it is FTS5 syntax (:func:`build_match`).
            k: At most this many.

        Returns:
            ``(item, score)`` pairs, score ``-bm25`` (higher is better).
        """
        match = build_match(query, idents=False)  # items_fts has no idents column
        if match is None or k <= 0:
            return []
        cols = ", ".join(f"i.{c.strip()}" for c in _COLUMNS.split(","))
        rows = self._conn.execute(
            f"SELECT {cols}, bm25(items_fts, {_WEIGHTS}) AS r FROM items_fts"
            " JOIN items i ON i.rid = items_fts.rowid"
            " WHERE items_fts MATCH ? AND i.repo = ? ORDER BY r, i.uid LIMIT ?",
            (match, repo, int(k)),
        ).fetchall()
        return [(_row_item(r[:-1]), -float(r[-1])) for r in rows]

    def by_prefix(self, repo: str, prefix: str) -> list[Item]:
        """Items whose uid starts with ``prefix`` (an id without its ``#``).

        Args:
            repo: The repo key.
            prefix: Lowercase hex digits.

        Returns:
            Every match (more than one means the id is ambiguous).
        """
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE repo = ? AND substr(uid, 1, ?) = ?",
            (repo, len(prefix), prefix),
        )
        return [_row_item(r) for r in rows]

    def has_event(self, repo: str, eid: str) -> bool:
        """Whether any host log of ``repo`` already holds the event ``eid`` (as last refreshed).

        Args:
            repo: The repo key.
            eid: The event id.

        Returns:
            True when an indexed line has that event id.
        """
        row = self._conn.execute(
            "SELECT 1 FROM events WHERE repo = ? AND eid = ? LIMIT 1", (repo, eid)
        ).fetchone()
        return row is not None

    def by_title(self, repo: str, kind: str, title: str) -> Item | None:
        """The newest item of ``kind`` with ``title`` (case-insensitive) that is not closed.

        Args:
            repo: The repo key.
            kind: The item kind.
            title: The normalised title.

        Returns:
            The item, or ``None``.
        """
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE repo = ? AND kind = ? AND lower(title) = lower(?)"
            " AND base IN ('open', 'note') ORDER BY created_at DESC LIMIT 1",
            (repo, kind, title),
        ).fetchone()
        return None if row is None else _row_item(row)

    def log_dirs(self) -> dict[str, Path]:
        """Every repo key the index has read logs for, with the directory of those logs.

        Returns:
            ``repo key -> log directory`` (the directory of its first stored log).
        """
        out: dict[str, Path] = {}
        for repo, path in self._conn.execute("SELECT repo, path FROM logs ORDER BY repo, path"):
            out.setdefault(repo, Path(path).parent)
        return out

    def forget(self, repo: str) -> None:
        """Drop every row of ``repo`` (its logs are read again under whatever key names them).

        Args:
            repo: The repo key.
        """
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(
                "DELETE FROM items_fts WHERE rowid IN (SELECT rid FROM items WHERE repo = ?)",
                (repo,),
            )
            for table in ("items", "events", "logs"):
                self._conn.execute(f"DELETE FROM {table} WHERE repo = ?", (repo,))  # noqa: S608 - fixed names
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def bad_lines(self, repo: str) -> int:
        """How many invalid lines the logs of ``repo`` hold (skipped by the fold).

        Args:
            repo: The repo key.

        Returns:
            The count over all its host logs.
        """
        row = self._conn.execute(
            "SELECT coalesce(sum(bad), 0) FROM logs WHERE repo = ?", (repo,)
        ).fetchone()
        return int(row[0])
