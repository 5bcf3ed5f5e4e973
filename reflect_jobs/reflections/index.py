"""The derived SQLite FTS5 index of the reflection logs, refreshed by stat (never committed).

``$REFLECT_HOME/reflections-index.db`` (0600, WAL) holds, per repository, every event line
that counts, the folded items with their derived ids, an FTS5 table over title, body and
notes, and what was last seen of each host log: size, mtime, inode, the offset read up to, a
hash of the 4 KiB before that offset, and what the log held that was not folded. It can be
deleted at any time; the next refresh rebuilds it from the logs.

:meth:`ReflectionIndex.refresh` first stats the log directory and compares: when nothing
changed it costs a directory scan, a few ``stat`` calls and one small SELECT. A log whose
bytes before the stored offset are unchanged (it grew, or git replaced it by a longer copy)
is read from that offset; any other change rereads that one log.

**A log speaks only for its host.** A line of ``<host>.jsonl`` whose ``host`` is another
machine is ignored and counted (a synced log cannot forge another machine's events); an
event id already held by any log of the repository is ignored and counted (a reuse cannot
replace an event); a line over :data:`~.events.MAX_LINE_BYTES` is skipped and counted
without being held; a time more than 5 minutes ahead of the moment the line is first read is
clamped to that bound (:mod:`.fold`). Invalid lines are skipped and counted, never fatal.

**Bounded at every size.** A log is streamed (:func:`~.logscan.iter_lines`) and committed
every :data:`CHUNK_LINES` lines; the items its events touch are marked ``dirty`` in the same
transaction and folded again in batches of :data:`FOLD_BATCH`, each item's events streamed
from SQLite in fold order (:class:`~.fold.Folder`). Memory does not grow with the log, a
refresh that is stopped (a ``deadline``, a kill) resumes where it committed, and readers see
a consistent, possibly slightly stale index throughout. Refreshes of one index file take
turns on an ``flock``; a caller that must not wait (the session-start hook) passes
``blocking=False`` and reads what is committed. When logs shrink, the index gives the space
back (``incremental_vacuum``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from . import memories
from .fold import Item, now_utc
from .index_fold import refold
from .index_ingest import CHUNK_LINES, RefreshStats, forget_log, ingest, plan, stored, tx
from .index_schema import _COLUMNS, _SCHEMA, _WEIGHTS, COUNTERS, SCHEMA_VERSION, _row_item
from .logscan import leads_sql, scan_logs

__all__ = ["CHUNK_LINES", "RefreshStats", "ReflectionIndex", "index_path"]

#: Give space back when at least this much of the file is free pages, and a quarter of it.
SHRINK_MIN_BYTES = 4 << 20


def index_path(reflect_home: Path) -> Path:
    """Where the index lives: ``$REFLECT_HOME/reflections-index.db``.

    Args:
        reflect_home: The state directory.

    Returns:
        The database path.
    """
    return reflect_home / "reflections-index.db"


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
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before the first table
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA synchronous = NORMAL")
            # The harnesses' memory files, searched beside the items (memories.py).
            memories.ensure_schema(conn)
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

    @contextlib.contextmanager
    def _turn(self, blocking: bool) -> Iterator[bool]:
        """Hold the refresh lock (``<index>.lock``); yields False when not blocking and taken."""
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _pending(self, repo: str) -> bool:
        return (
            self._conn.execute("SELECT 1 FROM dirty WHERE repo = ? LIMIT 1", (repo,)).fetchone()
            is not None
        )

    def up_to_date(self, repo: str, log_dir: Path) -> bool:
        """Whether the index of ``repo`` already matches its logs (a stat scan, one SELECT).

        Args:
            repo: The repo key.
            log_dir: ``<memory home>/reflections``.

        Returns:
            True when every log's size, mtime and inode are as last read and nothing waits
            to be folded.
        """
        current = scan_logs(log_dir)
        seen = stored(self._conn, repo)
        same = seen.keys() == current.keys() and all(seen[p][:3] == current[p] for p in current)
        return same and not self._pending(repo)

    def refresh(
        self,
        repo: str,
        log_dir: Path,
        *,
        own: str | None = None,
        now: datetime | None = None,
        deadline: float | None = None,
        blocking: bool = True,
    ) -> RefreshStats:
        """Bring the index of ``repo`` in line with its host logs; cheap when nothing changed.

        Args:
            repo: The repo key.
            log_dir: ``<memory home>/reflections``.
            own: This machine's host name: its log is read first, so on a rebuild its events
                keep their ids against a synced log that reuses them.
            now: The reading time (the future bound of new events); ``None`` for now.
            deadline: A ``time.monotonic()`` value after which the refresh stops at its next
                commit (``complete`` False); ``None`` runs it to the end.
            blocking: Wait for another refresh of this file to finish; False gives up at once.

        Returns:
            What was read and folded.
        """
        stats = RefreshStats()
        if self.up_to_date(repo, log_dir):
            return stats
        with self._turn(blocking) as mine:
            if not mine:
                stats.complete = False
                return stats
            stats.changed = True
            when = now or now_utc()
            current = scan_logs(log_dir)
            seen = stored(self._conn, repo)
            todo = plan(current, seen, stats)
            for path in todo["forget"]:
                tx(self._conn, lambda p=path: forget_log(self._conn, repo, p))
            order = sorted(current, key=lambda p: (Path(p).stem != own, p))
            for path in order:
                if path in todo["skip"]:
                    continue
                old = None if path in todo["reread"] else seen.get(path)
                if not ingest(self._conn, repo, path, old, stats, when, deadline):
                    stats.complete = False
                    break
            if stats.complete:
                stats.complete = refold(self._conn, repo, stats, deadline)
            if todo["forget"] or todo["reread"] or stats.events > CHUNK_LINES:
                self._shrink()
        return stats

    def _shrink(self) -> None:
        """Give free pages back to the file system when the index shrank a lot."""
        page = self._conn.execute("PRAGMA page_size").fetchone()[0]
        free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        if free * page >= SHRINK_MIN_BYTES and free * 4 >= pages:
            # sqlite3_exec steps it to the end (a cursor's execute frees one page only)
            self._conn.executescript("PRAGMA incremental_vacuum;")
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

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
        """Open items that are not stale, leads first then newest, and how many there are.

        The leads are the handoffs a person or a skill wrote (:func:`.logscan.leads_sql`):
        a reflector's handoff is ordered by age among the rest, so a fooled model never
        jumps an honest handoff.

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
                f" AND {'' if handoffs else 'NOT '}({leads_sql()})"
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
        from reflect_jobs.index.lexical import build_match  # not on the hook's refresh path

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

    def memory_search(
        self, sources: list[memories.Source], query: str, k: int = 5
    ) -> list[dict[str, Any]]:
        """The memory files of ``sources`` matching ``query``, refreshed by stat first.

        Args:
            sources: The memory directories (:func:`memories.sources_for`).
            query: Free text.
            k: At most this many hits.

        Returns:
            :func:`memories.search`'s hits (each names its file).
        """
        for source in sources:
            memories.refresh(self._conn, source)
        return memories.search(self._conn, sources, query, k)

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
        conn = self._conn

        def body() -> None:
            conn.execute(
                "DELETE FROM items_fts WHERE rowid IN (SELECT rid FROM items WHERE repo = ?)",
                (repo,),
            )
            for table in ("items", "events", "logs", "dirty"):
                conn.execute(f"DELETE FROM {table} WHERE repo = ?", (repo,))  # noqa: S608

        tx(conn, body)

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

    def log_report(self, repo: str | None = None) -> list[dict[str, Any]]:
        """Per host log, what it holds that counts and what was ignored (``reflections doctor``).

        Args:
            repo: One repo key, or ``None`` for every repository in the index.

        Returns:
            ``{"repo", "log", "events", "bad", "other_host", "reused", "oversize", "future"}``
            per log, by repository then path: ``bad`` invalid lines, ``other_host`` events
            claiming another host, ``reused`` events whose id another line holds,
            ``oversize`` lines over 64 KiB (all four not folded), ``future`` times clamped.
        """
        sql = f"SELECT repo, path, events, {', '.join(COUNTERS)} FROM logs"
        args: tuple[str, ...] = ()
        if repo is not None:
            sql += " WHERE repo = ?"
            args = (repo,)
        rows = self._conn.execute(sql + " ORDER BY repo, path", args)
        keys = ("repo", "log", "events", *COUNTERS)
        return [dict(zip(keys, r, strict=True)) for r in rows]
