"""SQLite-backed storages for :mod:`reflect_jobs.index.graph` (incremental persistence).

nano-graphrag's own storages keep everything in memory and rewrite whole files (JSON KV
stores, nano-vectordb matrices, the GraphML graph) on every commit: O(index) per insert.
These classes keep the same interfaces (``BaseKVStorage``, ``BaseVectorStorage``,
``BaseGraphStorage``; they are passed to ``GraphRAG`` as its storage classes) but write
through to one SQLite database (:data:`DB_NAME`), so a commit writes only the rows it
touched.  All storages of one index share one connection (:class:`IndexDB`, handed to them
through ``addon_params["reflect_db"]``), so one transaction spans every store and is the
commit point of an upsert/remove.

In-memory caches are only read accelerators, loaded lazily and kept in sync on writes
(write-through); :meth:`IndexDB.invalidate` drops them (after a rollback, or when another
process committed):

* vectors: a normalised float32 matrix per namespace (rows appended/swapped in place);
* graph: a networkx graph, materialised only for clustering, GraphML export or callers that
  ask for :attr:`SQLiteGraphStorage.graph`; point reads (``get_node``, ``has_edge``,
  neighbours ...) go to SQLite while it is not loaded.

Tables: ``meta`` (key -> JSON), ``docs`` (note id -> manifest entry JSON), ``chunk_doc``
(chunk key -> note id), ``kv`` (namespace, id -> JSON), ``vectors`` (namespace, id ->
float32 BLOB + JSON meta), ``nodes`` (name -> JSON data), ``edges`` ((a, b) with a <= b ->
JSON data).  Row order (rowid; upserts keep it) is the insertion order the in-memory
structures are rebuilt in, so a reload sees the same order a live instance has.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
from nano_graphrag._storage import NetworkXStorage
from nano_graphrag.base import BaseKVStorage, BaseVectorStorage

from reflect_jobs.faults import failpoint

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


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


class IndexDB:
    """One SQLite connection shared by every storage of an index (one transaction for all).

    Not thread-safe on its own: :class:`~reflect_jobs.index.graph.GraphIndex` serialises
    every call with its lock.  ``check_same_thread=False`` because the async pipeline may run
    on a helper thread while the caller waits.
    """

    def __init__(self, path: Path) -> None:
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
        if self.conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
            self.conn = None

    def replaced(self) -> bool:
        """True when the file at ``path`` is not the one we have open (deleted/recreated)."""
        try:
            return os.stat(self.path).st_ino != self.ino
        except FileNotFoundError:
            return True

    def register(self, cache: Any) -> None:
        self._caches.append(cache)

    def invalidate(self) -> None:
        for c in self._caches:
            c.invalidate()

    @property
    def in_transaction(self) -> bool:
        return bool(self.conn is not None and self.conn.in_transaction)

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn is not None and self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.invalidate()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction (consistent view across several statements)."""
        if self.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> sqlite3.Cursor:
        return self.conn.executemany(sql, rows)

    def total_changes(self) -> int:
        return self.conn.total_changes

    # ------------------------------------------------------------------ meta

    def meta_get(self, key: str, default: Any = None) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def meta_set(self, key: str, value: Any) -> None:
        self.conn.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, _dumps(value)),
        )

    def generation(self) -> int:
        return int(self.meta_get("generation", 0))

    def is_empty(self) -> bool:
        return self.conn.execute("SELECT 1 FROM meta LIMIT 1").fetchone() is None

    def wipe(self) -> None:
        for t in ("meta", "docs", "chunk_doc", "kv", "vectors", "nodes", "edges"):
            self.conn.execute(f"DELETE FROM {t}")  # noqa: S608 - fixed table names


def _db(global_config: dict) -> IndexDB:
    return global_config["addon_params"]["reflect_db"]


# --------------------------------------------------------------------------------------------
# read-only mapping views (what tests and callers used to get as plain dicts)


class JsonTableView(Mapping):
    """``key -> JSON value`` rows of one table (optionally one namespace), read live."""

    def __init__(self, db: IndexDB, table: str, key: str, value: str, ns: str | None = None):
        self._db, self._t, self._k, self._v, self._ns = db, table, key, value, ns
        self._where = " AND ns = ?" if ns is not None else ""
        self._args: tuple = (ns,) if ns is not None else ()

    def __getitem__(self, k: str) -> Any:
        row = self._db.execute(
            f"SELECT {self._v} FROM {self._t} WHERE {self._k} = ?{self._where}",  # noqa: S608
            (k, *self._args),
        ).fetchone()
        if row is None:
            raise KeyError(k)
        return json.loads(row[0]) if self._v != "doc_id" else row[0]

    def __contains__(self, k: object) -> bool:
        return (
            self._db.execute(
                f"SELECT 1 FROM {self._t} WHERE {self._k} = ?{self._where}",  # noqa: S608
                (k, *self._args),
            ).fetchone()
            is not None
        )

    def __iter__(self) -> Iterator[str]:
        where = " WHERE ns = ?" if self._ns is not None else ""
        rows = self._db.execute(
            f"SELECT {self._k} FROM {self._t}{where} ORDER BY rowid",  # noqa: S608
            self._args,
        ).fetchall()
        return iter([r[0] for r in rows])

    def __len__(self) -> int:
        where = " WHERE ns = ?" if self._ns is not None else ""
        return self._db.execute(
            f"SELECT count(*) FROM {self._t}{where}",  # noqa: S608
            self._args,
        ).fetchone()[0]

    def __bool__(self) -> bool:
        where = " WHERE ns = ?" if self._ns is not None else ""
        return (
            self._db.execute(
                f"SELECT 1 FROM {self._t}{where} LIMIT 1",  # noqa: S608
                self._args,
            ).fetchone()
            is not None
        )

    def items(self):  # one query instead of one per key
        where = " WHERE ns = ?" if self._ns is not None else ""
        rows = self._db.execute(
            f"SELECT {self._k}, {self._v} FROM {self._t}{where} ORDER BY rowid",  # noqa: S608
            self._args,
        ).fetchall()
        dec = (lambda x: x) if self._v == "doc_id" else json.loads
        return [(k, dec(v)) for k, v in rows]

    def values(self):
        return [v for _, v in self.items()]


# --------------------------------------------------------------------------------------------
# KV


@dataclass
class SQLiteKVStorage(BaseKVStorage):
    """nano-graphrag KV storage on the ``kv`` table (full_docs, text_chunks, community
    reports, llm cache).  ``_data`` is a live read-only mapping view.

    :meth:`cached` returns an in-memory dict of the whole namespace (loaded once, dropped on
    any write or :meth:`IndexDB.invalidate`): for small namespaces read on every query
    (community reports)."""

    def __post_init__(self):
        self._db = _db(self.global_config)
        self._data = JsonTableView(self._db, "kv", "id", "value", ns=self.namespace)
        self._cache: dict | None = None
        self._db.register(self)

    def invalidate(self) -> None:
        self._cache = None

    def cached(self) -> dict:
        if self._cache is None:
            with self._db.snapshot():
                self._cache = dict(self._data.items())
        return self._cache

    async def all_keys(self) -> list[str]:
        return list(self._data)

    async def index_done_callback(self):
        pass  # the GraphIndex transaction is the commit

    async def get_by_id(self, id):  # noqa: A002 - nano-graphrag's signature
        return self._data.get(id)

    async def get_by_ids(self, ids, fields=None):
        out = [self._data.get(i) for i in ids]
        if fields is None:
            return out
        return [{k: v for k, v in d.items() if k in fields} if d else None for d in out]

    async def filter_keys(self, data: list[str]) -> set[str]:
        return {s for s in data if s not in self._data}

    async def upsert(self, data: dict[str, dict]):
        self._cache = None
        self._db.executemany(
            "INSERT INTO kv VALUES (?, ?, ?) "
            "ON CONFLICT(ns, id) DO UPDATE SET value = excluded.value",
            [(self.namespace, k, _dumps(v)) for k, v in data.items()],
        )
        failpoint(f"kv_upsert:{self.namespace}")

    async def drop(self):
        self._cache = None
        self._db.execute("DELETE FROM kv WHERE ns = ?", (self.namespace,))

    def delete(self, ids: Iterable[str]) -> None:
        self._cache = None
        self._db.executemany(
            "DELETE FROM kv WHERE ns = ? AND id = ?", [(self.namespace, i) for i in ids]
        )


# --------------------------------------------------------------------------------------------
# vectors


def _normalize(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=-1, keepdims=True)


@dataclass
class SQLiteVectorStorage(BaseVectorStorage):
    """Vectors as float32 BLOBs (normalised, like nano-vectordb's cosine metric); queries
    run on an in-memory matrix loaded on first use and kept in sync on writes.

    ``addon_params['max_embed_chars'][namespace]`` caps the text embedded per vector: an
    entity's vector is ``name + description`` and descriptions merged from many notes get
    long, which only costs embedding time (the model truncates at 256 word pieces anyway)."""

    cosine_better_than_threshold: float = 0.2

    def __post_init__(self):
        self._db = _db(self.global_config)
        self._max_batch_size = self.global_config["embedding_batch_num"]
        self._dim = int(self.embedding_func.embedding_dim)
        self.cosine_better_than_threshold = self.global_config.get(
            "query_better_than_threshold", self.cosine_better_than_threshold
        )
        self._cache_lock = threading.Lock()
        self.invalidate()
        self._db.register(self)

    # ---------------------------------------------------------------- cache

    def invalidate(self) -> None:
        self._loaded = False
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._meta: list[dict] = []
        self._mat = np.zeros((0, self._dim), dtype=np.float32)

    def _load(self) -> None:
        if self._loaded:
            return
        with self._db.snapshot():
            rows = self._db.execute(
                "SELECT id, vec, meta FROM vectors WHERE ns = ? ORDER BY rowid",
                (self.namespace,),
            ).fetchall()
        n = len(rows)
        mat = np.empty((max(n, 16), self._dim), dtype=np.float32)
        if n:
            mat[:n] = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(
                n, self._dim
            )
        self._ids = [r[0] for r in rows]
        self._pos = {k: i for i, k in enumerate(self._ids)}
        self._meta = [json.loads(r[2]) for r in rows]
        self._mat = mat
        self._loaded = True

    def _cache_put(self, ids: list[str], vecs: np.ndarray, metas: list[dict]) -> None:
        for k, v, m in zip(ids, vecs, metas, strict=True):
            i = self._pos.get(k)
            if i is None:
                i = len(self._ids)
                if i >= len(self._mat):
                    grown = np.empty((max(16, 2 * len(self._mat)), self._dim), dtype=np.float32)
                    grown[:i] = self._mat[:i]
                    self._mat = grown
                self._ids.append(k)
                self._meta.append(m)
                self._pos[k] = i
            else:
                self._meta[i] = m
            self._mat[i] = v

    def _cache_delete(self, ids: Iterable[str]) -> None:
        for k in ids:
            i = self._pos.pop(k, None)
            if i is None:
                continue
            last = len(self._ids) - 1
            if i != last:  # move the last row into the hole
                self._mat[i] = self._mat[last]
                self._ids[i] = self._ids[last]
                self._meta[i] = self._meta[last]
                self._pos[self._ids[i]] = i
            self._ids.pop()
            self._meta.pop()

    # ---------------------------------------------------------------- writes

    async def upsert(self, data: dict[str, dict]):
        if not data:
            return []
        cap = (self.global_config.get("addon_params", {}).get("max_embed_chars") or {}).get(
            self.namespace
        )
        ids = list(data)
        contents = [v["content"][:cap] if cap else v["content"] for v in data.values()]
        metas = [{k: v for k, v in d.items() if k in self.meta_fields} for d in data.values()]
        batches = [
            contents[i : i + self._max_batch_size]
            for i in range(0, len(contents), self._max_batch_size)
        ]
        embs = [np.asarray(await self.embedding_func(b), dtype=np.float32) for b in batches]
        vecs = _normalize(np.concatenate(embs).reshape(len(ids), self._dim)).astype(np.float32)
        self._db.executemany(
            "INSERT INTO vectors VALUES (?, ?, ?, ?) ON CONFLICT(ns, id) DO UPDATE SET "
            "vec = excluded.vec, meta = excluded.meta",
            [
                (self.namespace, k, v.tobytes(), _dumps(m))
                for k, v, m in zip(ids, vecs, metas, strict=True)
            ],
        )
        if self._loaded:
            self._cache_put(ids, vecs, metas)
        return ids

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if not ids:
            return
        self._db.executemany(
            "DELETE FROM vectors WHERE ns = ? AND id = ?", [(self.namespace, i) for i in ids]
        )
        if self._loaded:
            self._cache_delete(ids)

    def clear(self) -> None:
        self._db.execute("DELETE FROM vectors WHERE ns = ?", (self.namespace,))
        self.invalidate()

    async def index_done_callback(self):
        pass

    # ---------------------------------------------------------------- reads

    def query_vector(self, vec: np.ndarray, top_k: int) -> list[tuple[str, float, dict]]:
        """``(id, cosine, meta)`` best first, like nano-vectordb (threshold included)."""
        with self._cache_lock:
            self._load()
            n = len(self._ids)
            if n == 0 or top_k <= 0:
                return []
            q = np.asarray(vec, dtype=np.float32)
            q = q / np.linalg.norm(q)
            scores = self._mat[:n] @ q
            if top_k < n:
                part = np.argpartition(scores, n - top_k)[n - top_k :]
                order = part[np.argsort(scores[part], kind="stable")][::-1]
            else:
                order = np.argsort(scores, kind="stable")[::-1]
            out = []
            thr = self.cosine_better_than_threshold
            for i in order:
                s = float(scores[i])
                if thr is not None and s < thr:
                    break
                out.append((self._ids[i], s, {**self._meta[i], "__id__": self._ids[i]}))
            return out

    async def query(self, query: str, top_k: int = 5):
        emb = await self.embedding_func([query])
        return [
            {**m, "id": i, "distance": s, "__metrics__": s}
            for i, s, m in self.query_vector(np.asarray(emb)[0], top_k)
        ]

    def __len__(self) -> int:
        if self._loaded:
            return len(self._ids)
        return self._db.execute(
            "SELECT count(*) FROM vectors WHERE ns = ?", (self.namespace,)
        ).fetchone()[0]


# --------------------------------------------------------------------------------------------
# graph


def _ekey(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass
class SQLiteGraphStorage(NetworkXStorage):
    """The entity graph in the ``nodes``/``edges`` tables.  Point reads and writes go to
    SQLite; a networkx graph is materialised only on demand (:attr:`graph`: clustering,
    community schema, GraphML export) and then kept in sync on writes.  Clustering is
    louvain (networkx; no graspologic) and only runs when
    :meth:`GraphIndex.rebuild_communities` asks for it."""

    def __post_init__(self):  # no GraphML load: SQLite is the store
        self._db = _db(self.global_config)
        self._nx: nx.Graph | None = None
        self._clustering_algorithms = {
            "louvain": self._louvain_clustering,
            "leiden": self._louvain_clustering,
        }
        self._node_embed_algorithms = {}
        self._db.register(self)

    def invalidate(self) -> None:
        self._nx = None

    @property
    def loaded(self) -> bool:
        return self._nx is not None

    @property
    def graph(self) -> nx.Graph:
        if self._nx is None:
            g = nx.Graph()
            with self._db.snapshot():
                nodes = self._db.execute("SELECT name, data FROM nodes ORDER BY rowid").fetchall()
                edges = self._db.execute("SELECT a, b, data FROM edges ORDER BY rowid").fetchall()
            g.add_nodes_from((n, json.loads(d)) for n, d in nodes)
            g.add_edges_from((a, b, json.loads(d)) for a, b, d in edges)
            self._nx = g
        return self._nx

    # nano-graphrag's NetworkXStorage methods read ``self._graph``
    @property
    def _graph(self) -> nx.Graph:
        return self.graph

    async def index_done_callback(self):
        pass

    # ---------------------------------------------------------------- sync point access

    def node_data(self, n: str) -> dict | None:
        if self._nx is not None:
            d = self._nx.nodes.get(n)
            return None if d is None else dict(d)
        row = self._db.execute("SELECT data FROM nodes WHERE name = ?", (n,)).fetchone()
        return None if row is None else json.loads(row[0])

    def edge_data(self, a: str, b: str) -> dict | None:
        if self._nx is not None:
            d = self._nx.edges.get((a, b))
            return None if d is None else dict(d)
        row = self._db.execute(
            "SELECT data FROM edges WHERE a = ? AND b = ?", _ekey(a, b)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def neighbours(self, n: str) -> list[tuple[str, dict]]:
        if self._nx is not None:
            if n not in self._nx:
                return []
            return [(m, d) for m, d in self._nx[n].items()]
        rows = self._db.execute(
            "SELECT b, data, rowid FROM edges WHERE a = ? "
            "UNION ALL SELECT a, data, rowid FROM edges WHERE b = ? AND a != ? ORDER BY 3",
            (n, n, n),
        ).fetchall()
        return [(m, json.loads(d)) for m, d, _ in rows]

    def degree(self, n: str) -> int:
        if self._nx is not None:
            return self._nx.degree(n) if self._nx.has_node(n) else 0
        row = self._db.execute(
            "SELECT (SELECT count(*) FROM edges WHERE a = ?) + "
            "(SELECT count(*) FROM edges WHERE b = ?)",
            (n, n),
        ).fetchone()
        return int(row[0])

    def put_node(self, n: str, data: dict) -> None:
        """Set a node's data (replacing it), creating the node if needed."""
        self._db.execute(
            "INSERT INTO nodes VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET data = excluded.data",
            (n, _dumps(data)),
        )
        if self._nx is not None:
            if n in self._nx:
                self._nx.nodes[n].clear()
            self._nx.add_node(n, **data)

    def put_edge(self, a: str, b: str, data: dict) -> None:
        """Set an edge's data (replacing it); missing end nodes are created empty, as
        networkx does."""
        for n in (a, b):
            self._db.execute("INSERT OR IGNORE INTO nodes VALUES (?, '{}')", (n,))
        self._db.execute(
            "INSERT INTO edges VALUES (?, ?, ?) "
            "ON CONFLICT(a, b) DO UPDATE SET data = excluded.data",
            (*_ekey(a, b), _dumps(data)),
        )
        if self._nx is not None:
            if self._nx.has_edge(a, b):
                self._nx.edges[a, b].clear()
            self._nx.add_edge(a, b, **data)

    def remove_node(self, n: str) -> None:
        self._db.execute("DELETE FROM edges WHERE a = ? OR b = ?", (n, n))
        self._db.execute("DELETE FROM nodes WHERE name = ?", (n,))
        if self._nx is not None and n in self._nx:
            self._nx.remove_node(n)

    def remove_edge(self, a: str, b: str) -> None:
        self._db.execute("DELETE FROM edges WHERE a = ? AND b = ?", _ekey(a, b))
        if self._nx is not None and self._nx.has_edge(a, b):
            self._nx.remove_edge(a, b)

    def number_of_nodes(self) -> int:
        if self._nx is not None:
            return self._nx.number_of_nodes()
        return self._db.execute("SELECT count(*) FROM nodes").fetchone()[0]

    # ---------------------------------------------------------------- BaseGraphStorage API

    async def has_node(self, node_id: str) -> bool:
        if self._nx is not None:
            return self._nx.has_node(node_id)
        return (
            self._db.execute("SELECT 1 FROM nodes WHERE name = ?", (node_id,)).fetchone()
            is not None
        )

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        return self.edge_data(source_node_id, target_node_id) is not None

    async def get_node(self, node_id: str) -> dict | None:
        return self.node_data(node_id)

    async def get_edge(self, source_node_id: str, target_node_id: str) -> dict | None:
        return self.edge_data(source_node_id, target_node_id)

    async def node_degree(self, node_id: str) -> int:
        return self.degree(node_id)

    async def edge_degree(self, src_id: str, tgt_id: str) -> int:
        return self.degree(src_id) + self.degree(tgt_id)

    async def get_node_edges(self, source_node_id: str):
        if not await self.has_node(source_node_id):
            return None
        return [(source_node_id, m) for m, _ in self.neighbours(source_node_id)]

    async def upsert_node(self, node_id: str, node_data: dict[str, str]):
        # networkx's add_node(**data) merges attributes: keep that
        self.put_node(node_id, {**(self.node_data(node_id) or {}), **node_data})

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict):
        old = self.edge_data(source_node_id, target_node_id) or {}
        self.put_edge(source_node_id, target_node_id, {**old, **edge_data})

    async def clustering(self, algorithm: str):
        if algorithm not in self._clustering_algorithms:
            raise ValueError(f"Clustering algorithm {algorithm} not supported")
        await self._clustering_algorithms[algorithm]()
        # the one O(graph) write: every node's ``clusters`` attribute
        self._db.executemany(
            "UPDATE nodes SET data = ? WHERE name = ?",
            [(_dumps(d), n) for n, d in self.graph.nodes(data=True)],
        )

    async def _louvain_clustering(self):
        g = self.graph
        for _, data in g.nodes(data=True):
            data.pop("clusters", None)
        if g.number_of_nodes() == 0:
            return
        seed = int(self.global_config.get("graph_cluster_seed", 0)) % (2**32)
        max_levels = int(self.global_config.get("addon_params", {}).get("max_cluster_levels", 3))
        # louvain_partitions yields finest -> coarsest; nano-graphrag's level 0 is the coarsest.
        parts = [list(p) for p in nx.community.louvain_partitions(g, weight="weight", seed=seed)]
        if not parts:
            parts = [[{n} for n in g.nodes]]
        levels = list(reversed(parts))[:max_levels]
        assign: dict[str, list[dict]] = {}
        next_id = 0
        parent_of: dict[str, frozenset] = {}
        for level, partition in enumerate(levels):
            this_of: dict[str, frozenset] = {}
            for comm in sorted(partition, key=lambda c: (-len(c), min(c))):
                fz = frozenset(comm)
                for n in comm:
                    this_of[n] = fz
                if len(comm) < 2:
                    continue  # singletons make no useful report
                if level > 0 and parent_of.get(next(iter(comm))) == fz:
                    continue  # unchanged from the level above: no duplicate report
                for n in comm:
                    assign.setdefault(n, []).append({"level": level, "cluster": next_id})
                next_id += 1
            parent_of = this_of
        for n, cl in assign.items():
            g.nodes[n]["clusters"] = json.dumps(cl)

    # ---------------------------------------------------------------- export

    def export_graphml(self, path: str | os.PathLike[str]) -> None:
        """Write the graph as GraphML atomically (tmp + fsync + rename).  O(graph)."""
        path = os.fspath(path)
        d = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".graphml", dir=d)
        os.close(fd)
        try:
            nx.write_graphml(self.graph, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
