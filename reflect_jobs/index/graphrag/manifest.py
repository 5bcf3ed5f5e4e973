"""The index manifest: which chunks, entities and edges each note contributed.

nano-graphrag keys nothing by note and cannot delete.  The manifest (tables ``docs`` and
``chunk_doc`` of :data:`~reflect_jobs.index.sqlite_store.DB_NAME`) is what makes per-note
upsert and remove possible:

* ``docs``: note id -> ``{"key": doc key, "fp": fingerprint, "chunks": [chunk keys],
  "entities": [[name, type, desc]], "edges": [[a, b, desc, weight]]}``, the note's normalised
  contribution (:func:`~.sidecars.sidecar_contribution`), so a removal can recompute the
  shared nodes and edges from the notes that remain;
* ``chunk_doc``: chunk key -> note id, to map vector hits and node/edge ``source_id`` lists
  back to notes.

Both are live views on the shared :class:`~reflect_jobs.index.sqlite_store.IndexDB`
connection and write inside the index's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping

from ..json_table import JsonTableView
from ..sqlite_store import IndexDB


class DocManifest(JsonTableView):
    """note id -> manifest entry (``key``, ``fp``, ``chunks``, ``entities``, ``edges``)."""

    _db: IndexDB  # the whole database, not only the base view's one query

    def __init__(self, db: IndexDB) -> None:
        """A live view of the ``docs`` table.

        Args:
            db: The index's shared database.
        """
        super().__init__(db, "docs", "id", "entry")

    def put(self, doc_id: str, entry: dict) -> None:
        """Insert or replace one note's entry.

        Args:
            doc_id: The note id.
            entry: Its manifest entry.
        """
        self._db.execute(
            "INSERT INTO docs VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET entry = excluded.entry",
            (doc_id, json.dumps(entry, ensure_ascii=False)),
        )

    def delete(self, ids: list[str]) -> None:
        """Delete the entries of ``ids`` (unknown ids are ignored).

        Args:
            ids: Note ids.
        """
        self._db.executemany("DELETE FROM docs WHERE id = ?", [(i,) for i in ids])

    def fingerprints(self, ids: list[str]) -> dict[str, str]:
        """The stored fingerprints of those of ``ids`` that are indexed (one query).

        Args:
            ids: Note ids.

        Returns:
            note id -> fingerprint, for the ids in the manifest only.
        """
        rows = self._db.execute(
            "SELECT d.id, json_extract(d.entry, '$.fp') FROM json_each(?) j "
            "JOIN docs d ON d.id = j.value",
            (json.dumps(ids),),
        ).fetchall()
        return dict(rows)


class ChunkDocs(Mapping):
    """chunk key -> note id.  Point reads go to SQLite; queries load the whole map once
    (:meth:`load`) and it is then kept in sync on writes."""

    def __init__(self, db: IndexDB) -> None:
        """A view of the ``chunk_doc`` table; registers itself for invalidation.

        Args:
            db: The index's shared database.
        """
        self._db = db
        self._view = JsonTableView(db, "chunk_doc", "chunk", "doc_id")
        self._cache: dict[str, str] | None = None
        db.register(self)

    def invalidate(self) -> None:
        """Drop the in-memory map (after a rollback or another process's commit)."""
        self._cache = None

    def load(self) -> dict[str, str]:
        """The whole map in memory (loaded once, then kept in sync on writes).

        Returns:
            chunk key -> note id; the live cache, do not modify it.
        """
        if self._cache is None:
            with self._db.snapshot():
                self._cache = dict(
                    self._db.execute("SELECT chunk, doc_id FROM chunk_doc ORDER BY rowid")
                )
        return self._cache

    def __getitem__(self, k: str) -> str:
        return self._cache[k] if self._cache is not None else self._view[k]

    def __contains__(self, k: object) -> bool:
        return k in self._cache if self._cache is not None else k in self._view

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._cache if self._cache is not None else self._view))

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else len(self._view)

    def lookup(self, chunks: list[str]) -> dict[str, str]:
        """The notes of several chunks (one query, or the cache when loaded).

        Args:
            chunks: Chunk keys.

        Returns:
            chunk key -> note id for the known chunks.
        """
        if self._cache is not None:
            return {c: self._cache[c] for c in chunks if c in self._cache}
        rows = self._db.execute(
            "SELECT c.chunk, c.doc_id FROM json_each(?) j JOIN chunk_doc c ON c.chunk = j.value",
            (json.dumps(list(chunks)),),
        ).fetchall()
        return dict(rows)

    def docs_of(self, chunk_keys: Iterable[str]) -> list[str]:
        """The distinct notes of ``chunk_keys``, in the order of their first chunk.

        Args:
            chunk_keys: Chunk keys (unknown ones are skipped).

        Returns:
            Note ids.
        """
        chunk_keys = list(chunk_keys)
        found = self.lookup(chunk_keys)
        out: dict[str, None] = {}
        for ck in chunk_keys:
            d = found.get(ck)
            if d is not None:
                out[d] = None
        return list(out)

    def put(self, pairs: dict[str, str]) -> None:
        """Insert or replace chunk -> note pairs.

        Args:
            pairs: chunk key -> note id.
        """
        self._db.executemany(
            "INSERT INTO chunk_doc VALUES (?, ?) "
            "ON CONFLICT(chunk) DO UPDATE SET doc_id = excluded.doc_id",
            list(pairs.items()),
        )
        if self._cache is not None:
            self._cache.update(pairs)

    def delete(self, chunks: Iterable[str]) -> None:
        """Forget chunks.

        Args:
            chunks: Chunk keys (iterated twice: pass a collection).
        """
        self._db.executemany("DELETE FROM chunk_doc WHERE chunk = ?", [(c,) for c in chunks])
        if self._cache is not None:
            for c in chunks:
                self._cache.pop(c, None)
