"""The graph index's SQLite database, and its KV storage (incremental persistence).

nano-graphrag's own storages keep everything in memory and rewrite whole files (JSON KV
stores, nano-vectordb matrices, the GraphML graph) on every commit: O(index) per insert.
Ours keep the same interfaces (``BaseKVStorage`` here, ``BaseVectorStorage`` in
:mod:`reflect_jobs.index.sqlite_vectors`, ``BaseGraphStorage`` in
:mod:`reflect_jobs.index.sqlite_graph`; they are passed to ``GraphRAG`` as its storage classes)
but write through to one SQLite database (:data:`DB_NAME`), so a commit writes only the rows
it touched.  All storages of one index share one connection (:class:`IndexDB`, handed to them
through ``addon_params["reflect_db"]``, see :func:`config_db`), so one transaction spans every
store and is the commit point of an upsert/remove.

In-memory caches are only read accelerators, loaded lazily and kept in sync on writes
(write-through); :meth:`IndexDB.invalidate` drops them (after a rollback, or when another
process committed):

* vectors: a normalised float32 matrix per namespace (rows appended/swapped in place);
* graph: a networkx graph, materialised only for clustering, GraphML export or callers that
  ask for :attr:`~reflect_jobs.index.sqlite_graph.SQLiteGraphStorage.graph`; point reads
  (``get_node``, ``has_edge``, neighbours ...) go to SQLite while it is not loaded.

Tables (the schema, :data:`SCHEMA_VERSION`, lives here): ``meta`` (key -> JSON), ``docs``
(note id -> manifest entry JSON), ``chunk_doc`` (chunk key -> note id), ``kv`` (namespace,
id -> JSON), ``vectors`` (namespace, id -> float32 BLOB + JSON meta), ``nodes`` (name -> JSON
data), ``edges`` ((a, b) with a <= b -> JSON data).  Row order (rowid; upserts keep it) is the
insertion order the in-memory structures are rebuilt in, so a reload sees the same order a
live instance has.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nano_graphrag.base import BaseKVStorage

from reflect_jobs.faults import failpoint

from .json_table import JsonTableView

DB_NAME = "reflect_index.db"
SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunk_doc (chunk TEXT PRIMARY KEY, doc_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kv (
    ns TEXT NOT NULL, id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, id));
CREATE TABLE IF NOT EXISTS vectors (
    ns TEXT NOT NULL, id TEXT NOT NULL, vec BLOB NOT NULL, meta TEXT NOT NULL,
    PRIMARY KEY (ns, id));
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS edges (
    a TEXT NOT NULL, b TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (a, b));
CREATE INDEX IF NOT EXISTS edges_b ON edges (b);
"""


class IndexFormatError(RuntimeError):
    """The workdir holds an index this version cannot read, migrate or open (damaged)."""


def dumps_json(v: Any) -> str:
    """How every storage serialises a JSON column (UTF-8 kept as is).

    Args:
        v: A JSON-serialisable value.

    Returns:
        Its JSON text.
    """
    return json.dumps(v, ensure_ascii=False)


class IndexDB:
    """One SQLite connection shared by every storage of an index (one transaction for all).

    Not thread-safe on its own: :class:`~reflect_jobs.index.graphrag.GraphIndex` serialises
    every call with its lock.  ``check_same_thread=False`` because the async pipeline may run
    on a helper thread while the caller waits.
    """

    def __init__(self, path: Path) -> None:
        """Open (or create) the database.

        Args:
            path: The SQLite file (:data:`DB_NAME` in the graph directory).

        Raises:
            IndexFormatError: The file is not a readable SQLite database.
        """
        self.path = Path(path)
        self.conn: sqlite3.Connection | None = None
        self.ino: int | None = None
        self._caches: list[Any] = []  # objects with .invalidate()
        self.open()

    # nano-graphrag deep-copies its config (dataclasses.asdict) for every storage: share us.
    def __deepcopy__(self, memo):  # noqa: ANN001
        return self

    def __copy__(self):
        return self

    def open(self) -> None:
        """(Re)open the connection: WAL, ``synchronous=FULL``, schema created if missing.

        Any previous connection is closed first, the file's inode is remembered for
        :meth:`replaced`, and every registered cache is invalidated.

        Raises:
            IndexFormatError: The file is not a readable SQLite database.
        """
        self.close()
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        try:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.DatabaseError as exc:
                raise IndexFormatError(
                    f"index database {self.path} is damaged ({exc}): rebuild it from the "
                    "notes with `reflect-jobs reindex --force`"
                ) from exc
            conn.execute("PRAGMA synchronous=FULL")
            # a full build is one big transaction: give the WAL back after its checkpoint
            conn.execute("PRAGMA journal_size_limit=16777216")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        self.ino = os.stat(self.path).st_ino
        self.invalidate()

    def close(self) -> None:
        """Close the connection, if open (errors while closing are ignored)."""
        if self.conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
            self.conn = None

    def replaced(self) -> bool:
        """True when the file at ``path`` is not the one we have open (deleted/recreated).

        Returns:
            Whether the file is gone or has another inode than when it was opened.
        """
        try:
            return os.stat(self.path).st_ino != self.ino
        except FileNotFoundError:
            return True

    def register(self, cache: Any) -> None:
        """Have :meth:`invalidate` reach ``cache`` too.

        Args:
            cache: A storage with an ``invalidate()`` method that drops its read caches.
        """
        self._caches.append(cache)

    def invalidate(self) -> None:
        """Drop every registered storage's in-memory read caches."""
        for c in self._caches:
            c.invalidate()

    @property
    def live(self) -> sqlite3.Connection:
        """The open connection (:meth:`open` made it).

        Raises:
            sqlite3.ProgrammingError: After :meth:`close`, as sqlite3 says of a closed one.
        """
        if self.conn is None:
            raise sqlite3.ProgrammingError(f"index database {self.path} is closed")
        return self.conn

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on the connection."""
        return bool(self.conn is not None and self.conn.in_transaction)

    def begin(self) -> None:
        """Start a write transaction (``BEGIN IMMEDIATE``: the write lock is taken now)."""
        self.live.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        """Commit the open transaction."""
        self.live.execute("COMMIT")

    def rollback(self) -> None:
        """Roll back the open transaction, if any, and drop the caches it may have touched."""
        if self.conn is not None and self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.invalidate()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction (consistent view across several statements).

        Inside an open transaction it adds nothing (that one is already consistent).

        Yields:
            Nothing; the statements in the ``with`` block share one snapshot.
        """
        if self.in_transaction:
            yield
            return
        self.live.execute("BEGIN")
        try:
            yield
        finally:
            self.live.execute("COMMIT")

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        """Run one statement on the shared connection.

        Args:
            sql: The statement, with ``?`` placeholders.
            params: Its parameters.

        Returns:
            The cursor (fetch from it).
        """
        return self.live.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        """Run one statement once per parameter row.

        Args:
            sql: The statement, with ``?`` placeholders.
            rows: One parameter sequence per execution.

        Returns:
            The cursor.
        """
        return self.live.executemany(sql, rows)

    def total_changes(self) -> int:
        """Rows changed on this connection since it opened (compare before/after a write).

        Returns:
            SQLite's ``total_changes`` counter.
        """
        return self.live.total_changes

    # ------------------------------------------------------------------ meta

    def meta_get(self, key: str, default: Any = None) -> Any:
        """A JSON value from the ``meta`` table.

        Args:
            key: The meta key.
            default: What to return when the key is absent.

        Returns:
            The decoded value, or ``default``.
        """
        row = self.live.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def meta_set(self, key: str, value: Any) -> None:
        """Insert or replace a JSON value in the ``meta`` table (in the open transaction).

        Args:
            key: The meta key.
            value: A JSON-serialisable value.
        """
        self.live.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, dumps_json(value)),
        )

    def generation(self) -> int:
        """The commit counter writers bump, so other processes know to drop their caches.

        Returns:
            The stored ``generation``, 0 when none was ever stored.
        """
        return int(self.meta_get("generation", 0))

    def is_empty(self) -> bool:
        """Whether nothing was ever committed (the ``meta`` table has no row).

        Returns:
            ``True`` for a new database.
        """
        return self.live.execute("SELECT 1 FROM meta LIMIT 1").fetchone() is None

    def wipe(self) -> None:
        """Delete every row of every table (in the open transaction); the schema stays."""
        for t in ("meta", "docs", "chunk_doc", "kv", "vectors", "nodes", "edges"):
            self.live.execute(f"DELETE FROM {t}")  # noqa: S608 - fixed table names


def config_db(global_config: dict) -> IndexDB:
    """The shared database a storage was handed through nano-graphrag's config.

    Args:
        global_config: nano-graphrag's ``global_config`` (``asdict(GraphRAG)``).

    Returns:
        ``global_config["addon_params"]["reflect_db"]``.
    """
    return global_config["addon_params"]["reflect_db"]


# --------------------------------------------------------------------------------------------
# KV


@dataclass
class SQLiteKVStorage(BaseKVStorage):
    """nano-graphrag KV storage on the ``kv`` table, one namespace per store.

    The namespaces are full_docs, text_chunks, community reports and the llm cache.
    ``_data`` is a live read-only mapping view.

    :meth:`cached` returns an in-memory dict of the whole namespace (loaded once, dropped on
    any write or :meth:`IndexDB.invalidate`): for small namespaces read on every query
    (community reports)."""

    def __post_init__(self) -> None:
        self._db = config_db(self.global_config)
        self._data = JsonTableView(self._db, "kv", "id", "value", ns=self.namespace)
        self._cache: dict | None = None
        self._db.register(self)

    def invalidate(self) -> None:
        """Drop the :meth:`cached` copy."""
        self._cache = None

    def cached(self) -> dict:
        """The whole namespace as a dict, read once in one snapshot and kept until a write.

        Returns:
            ``{id: value}``; do not modify it (it is shared until invalidated).
        """
        if self._cache is None:
            with self._db.snapshot():
                self._cache = dict(self._data.items())
        return self._cache

    async def all_keys(self) -> list[str]:
        """Every id in the namespace.

        Returns:
            The ids in insertion order.
        """
        return list(self._data)

    async def index_done_callback(self):
        """Nothing to flush: the GraphIndex transaction is the commit."""
        pass  # the GraphIndex transaction is the commit

    async def get_by_id(self, id):  # noqa: A002 - nano-graphrag's signature
        """One value.

        Args:
            id: Its id.

        Returns:
            The value, or ``None`` when absent.
        """
        return self._data.get(id)

    async def get_by_ids(self, ids, fields=None):
        """Several values, in the order asked.

        Args:
            ids: The ids.
            fields: Keep only these keys of each value; ``None`` keeps them all.

        Returns:
            One value (or ``None`` when absent) per id.
        """
        out = [self._data.get(i) for i in ids]
        if fields is None:
            return out
        return [{k: v for k, v in d.items() if k in fields} if d else None for d in out]

    async def filter_keys(self, data: list[str]) -> set[str]:
        """The ids not stored yet (what nano-graphrag still has to insert).

        Args:
            data: Candidate ids.

        Returns:
            Those of ``data`` absent from the namespace.
        """
        return {s for s in data if s not in self._data}

    async def upsert(self, data: dict[str, dict]):
        """Insert or replace values, in the open transaction.

        Args:
            data: ``{id: value}`` (JSON-serialisable values).
        """
        self._cache = None
        self._db.executemany(
            "INSERT INTO kv VALUES (?, ?, ?) "
            "ON CONFLICT(ns, id) DO UPDATE SET value = excluded.value",
            [(self.namespace, k, dumps_json(v)) for k, v in data.items()],
        )
        failpoint(f"kv_upsert:{self.namespace}")

    async def drop(self):
        """Delete the whole namespace, in the open transaction."""
        self._cache = None
        self._db.execute("DELETE FROM kv WHERE ns = ?", (self.namespace,))

    def delete(self, ids: Iterable[str]) -> None:
        """Delete some ids (absent ones are ignored), in the open transaction.

        Args:
            ids: The ids to delete.
        """
        self._cache = None
        self._db.executemany(
            "DELETE FROM kv WHERE ns = ? AND id = ?", [(self.namespace, i) for i in ids]
        )
