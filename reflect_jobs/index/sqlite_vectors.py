"""Vector storage of the graph index: float32 BLOBs in SQLite, queried in memory.

nano-graphrag's default vector DB (nano-vectordb) keeps one matrix per namespace and rewrites
the whole file on every commit.  :class:`SQLiteVectorStorage` keeps the ``BaseVectorStorage``
interface but writes each vector as its own row of the ``vectors`` table of the shared
:class:`~reflect_jobs.index.sqlite_store.IndexDB` (inside the index's transaction), and
answers queries from a normalised float32 matrix loaded on first use and kept in sync on
writes (rows appended / swapped into holes in place), so inserting never loads it and a query
costs one matrix-vector product.  Scores are cosine similarities, like nano-vectordb's cosine
metric, with its ``cosine_better_than_threshold`` cut-off.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from nano_graphrag.base import BaseVectorStorage

from .sqlite_store import config_db, dumps_json


def _normalize(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=-1, keepdims=True)


@dataclass
class SQLiteVectorStorage(BaseVectorStorage):
    """Vectors as float32 BLOBs, normalised like nano-vectordb's cosine metric.

    Queries run on an in-memory matrix loaded on first use and kept in sync on writes.

    ``addon_params['max_embed_chars'][namespace]`` caps the text embedded per vector: an
    entity's vector is ``name + description`` and descriptions merged from many notes get
    long, which only costs embedding time (the model truncates at 256 word pieces anyway)."""

    cosine_better_than_threshold: float = 0.2

    def __post_init__(self):
        self._db = config_db(self.global_config)
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
        """Drop the in-memory matrix (after a rollback or another process's commit)."""
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
        """Embed and store vectors (nano-graphrag's ``BaseVectorStorage.upsert``).

        Args:
            data: id -> ``{"content": text to embed, **meta}``; only ``meta_fields`` are kept.

        Returns:
            The ids written.
        """
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
                (self.namespace, k, v.tobytes(), dumps_json(m))
                for k, v, m in zip(ids, vecs, metas, strict=True)
            ],
        )
        if self._loaded:
            self._cache_put(ids, vecs, metas)
        return ids

    def delete(self, ids: Iterable[str]) -> None:
        """Delete vectors (unknown ids are ignored).

        Args:
            ids: Vector ids.
        """
        ids = list(ids)
        if not ids:
            return
        self._db.executemany(
            "DELETE FROM vectors WHERE ns = ? AND id = ?", [(self.namespace, i) for i in ids]
        )
        if self._loaded:
            self._cache_delete(ids)

    def clear(self) -> None:
        """Delete every vector of this namespace."""
        self._db.execute("DELETE FROM vectors WHERE ns = ?", (self.namespace,))
        self.invalidate()

    async def index_done_callback(self):
        """Nothing to flush: the GraphIndex transaction is the commit."""
        pass

    # ---------------------------------------------------------------- reads

    def query_vector(self, vec: np.ndarray, top_k: int) -> list[tuple[str, float, dict]]:
        """The most similar vectors, like nano-vectordb (threshold included).

        Args:
            vec: The query vector (normalised here).
            top_k: How many to return at most.

        Returns:
            ``(id, cosine, meta)`` best first, stopping at the first score below
            ``cosine_better_than_threshold``.
        """
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
        """Embed ``query`` and return its nearest vectors, as nano-graphrag expects.

        Args:
            query: The text to embed.
            top_k: How many to return at most.

        Returns:
            One dict per hit, best first: the stored meta plus ``id``, ``distance`` and
            ``__metrics__`` (both the cosine similarity, higher is closer); hits below
            ``cosine_better_than_threshold`` are left out.
        """
        emb = await self.embedding_func([query])
        return [
            {**m, "id": i, "distance": s, "__metrics__": s}
            for i, s, m in self.query_vector(np.asarray(emb)[0], top_k)
        ]

    def __len__(self) -> int:
        """How many vectors this namespace holds."""
        if self._loaded:
            return len(self._ids)
        return self._db.execute(
            "SELECT count(*) FROM vectors WHERE ns = ?", (self.namespace,)
        ).fetchone()[0]
