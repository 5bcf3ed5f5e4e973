"""The :class:`GraphIndex` façade: one index directory, its locks, transactions and reloads.

The work is done elsewhere in this package (:mod:`.mutations` inserts and removes notes and
rebuilds communities, :mod:`.scoring` answers queries, :mod:`.engine` wires nano-graphrag to
our storages).  This module owns what makes a call safe and consistent:

* One SQLite transaction per ``upsert``/``remove``/``rebuild_communities``/``clear`` spans
  every store and is the commit point; on any error it is rolled back and the in-memory read
  caches are dropped (nothing half-applied survives, in memory or on disk).
* Read caches (the vector matrices, the chunk -> note map, a networkx graph) are loaded lazily
  by queries / clustering and kept in sync on writes; a writer that only inserts never loads
  them, so opening the index and adding a note is cheap.
* Writers are serialised by a thread lock and an ``flock`` on ``workdir/.index.lock``.  Every
  commit bumps a generation counter in the ``meta`` table; before every call an instance
  compares it (and the database file's inode, for ``reindex --force`` which deletes the
  directory) and drops its caches when another process has committed since.
* ``graph_chunk_entity_relation.graphml`` (:meth:`GraphIndex.graphml_path`) is an *export* of
  the graph tables, not the store: it is rewritten at the end of every
  :meth:`~GraphIndex.rebuild_communities` (the periodic task), written after any commit that
  finds it missing (so a fresh or ``--force``-rebuilt index always has one), and on demand by
  :meth:`~GraphIndex.export_graphml`.  Between rebuilds it may lag the index; edits to it
  (``repair --maintain``) do not flow back into the index and are overwritten by the next
  export.
* A workdir in the old whole-file format is migrated on first open (:mod:`.legacy`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..sqlite_store import DB_NAME, SCHEMA_VERSION, IndexDB, IndexFormatError
from . import bootstrap, legacy, mutations, scoring
from .engine import Engine, build_engine
from .sidecars import IndexDoc

if TYPE_CHECKING:
    from nano_graphrag.graphrag import GraphRAG

    from ..sqlite_vectors import SQLiteVectorStorage
    from .manifest import ChunkDocs, DocManifest
    from .passthrough import PassthroughLLM

log = logging.getLogger(__name__)

GRAPHML_NAME = "graph_chunk_entity_relation.graphml"
LOCK_NAME = ".index.lock"


def _run(coro_factory):
    """Run a coroutine to completion from sync code, in any thread, loop or no loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: asyncio.run(coro_factory())).result()


class GraphIndex:
    """Graph + vector index over KB notes in ``workdir``.  Thread-safe; writers are
    serialised across processes.

    Args:
        workdir: The index directory (created if missing).
        embedder: The embedder; by default the packaged model (:func:`get_embedder`).
        chunk_token_size: Chunk size in tokens.
        chunk_overlap: Overlap of consecutive chunks in tokens.

    Raises:
        ValueError: ``chunk_overlap >= chunk_token_size``, or the index was built with
            another embedding size.
        IndexFormatError: The database is damaged, of another format, or an old-format
            workdir cannot be migrated.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        embedder: Any = None,
        chunk_token_size: int = 200,
        chunk_overlap: int = 20,
    ):
        bootstrap.install()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if embedder is None:
            from ..embeddings import get_embedder

            embedder = get_embedder()
        self.embedder = embedder
        self.chunk_token_size = int(chunk_token_size)
        self.chunk_overlap = int(chunk_overlap)
        if self.chunk_overlap >= self.chunk_token_size:
            raise ValueError("chunk_overlap must be smaller than chunk_token_size")
        self._lock = threading.RLock()
        self._gen: int | None = None
        self._saved_communities: dict | None = None
        self.communities: dict = {"built": False, "stale": False}
        with self._lock:
            self.db = IndexDB(self.workdir / DB_NAME)
            self.engine: Engine = build_engine(
                self.workdir,
                self.db,
                embedder,
                chunk_token_size=self.chunk_token_size,
                chunk_overlap=self.chunk_overlap,
            )
            if legacy.present(self.workdir):
                with self._file_lock(fcntl.LOCK_EX):
                    if legacy.present(self.workdir):
                        legacy.import_legacy(
                            self.workdir, self.db, self.graphml_path(), self._settings()
                        )
            self._refresh()

    # ---------------------------------------------------------------- engine parts

    @property
    def rag(self) -> GraphRAG:
        """The configured nano-graphrag ``GraphRAG`` (its storages)."""
        return self.engine.rag

    @property
    def llm(self) -> PassthroughLLM:
        """The passthrough model (``calls`` counts the prompts it answered)."""
        return self.engine.llm

    @property
    def docs(self) -> DocManifest:
        """The per-note manifest (live read-only mapping view)."""
        return self.engine.docs

    @property
    def chunk_to_doc(self) -> ChunkDocs:
        """chunk key -> note id."""
        return self.engine.chunk_to_doc

    @property
    def community_vdb(self) -> SQLiteVectorStorage:
        """The community-report vectors."""
        return self.engine.community_vdb

    # ---------------------------------------------------------------- setup / reload

    def graphml_path(self) -> Path:
        """Where the GraphML export of the graph lives.

        Returns:
            ``workdir / graph_chunk_entity_relation.graphml``.
        """
        return self.workdir / GRAPHML_NAME

    def _settings(self) -> dict:
        return {
            "embed_model": getattr(self.embedder, "model_name", repr(self.embedder)),
            "embedding_dim": self.rag.embedding_func.embedding_dim,
            "chunk_token_size": self.chunk_token_size,
            "chunk_overlap": self.chunk_overlap,
        }

    def _refresh(self) -> None:
        """Pick up another process's commits: reopen a replaced database file, drop the
        read caches when the commit generation moved.  Costs a stat and one row read."""
        with self._lock:
            if self.db.replaced():
                log.info("index database in %s was replaced; reopening", self.workdir)
                self.db.open()
                self._gen = None
            gen = self.db.generation()
            if gen == self._gen:
                return
            if self._gen is not None:
                log.info("index in %s changed on disk; reloading", self.workdir)
            self.db.invalidate()
            version = self.db.meta_get("version", SCHEMA_VERSION)
            if version != SCHEMA_VERSION:
                raise IndexFormatError(
                    f"index in {self.workdir} has format {version}, this version reads "
                    f"{SCHEMA_VERSION}: rebuild it (reindex --force)"
                )
            settings = self.db.meta_get("settings") or {}
            dim = self.rag.embedding_func.embedding_dim
            if settings.get("embedding_dim") and settings["embedding_dim"] != dim:
                raise ValueError(
                    f"index in {self.workdir} was built with {settings['embedding_dim']}-d "
                    f"embeddings ({settings.get('embed_model')}); this embedder gives "
                    f"{dim}-d: rebuild the index (reindex --force)"
                )
            self.communities = self.db.meta_get("communities") or {
                "built": False,
                "stale": False,
            }
            self._saved_communities = json.loads(json.dumps(self.communities))
            self._gen = gen

    @contextlib.contextmanager
    def _file_lock(self, kind: int):
        fd = os.open(self.workdir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, kind)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def _write_lock(self, *, export: str | None = "missing"):
        """One SQLite transaction per write: it is the commit point.  On any error the
        transaction is rolled back and the read caches dropped (the database holds the last
        commit).  After a commit the GraphML export is refreshed (``export="always"``) or
        written if it is missing (``"missing"``)."""
        with self._lock, self._file_lock(fcntl.LOCK_EX):
            self._refresh()
            db = self.db
            before = db.total_changes()
            db.begin()
            try:
                yield
                if db.total_changes() != before or self.communities != self._saved_communities:
                    self._gen = (self._gen or 0) + 1
                    db.meta_set("version", SCHEMA_VERSION)
                    db.meta_set("settings", self._settings())
                    db.meta_set("communities", self.communities)
                    db.meta_set("generation", self._gen)
                db.commit()
                self._saved_communities = json.loads(json.dumps(self.communities))
            except BaseException:
                db.rollback()
                self._gen = None
                self._refresh()
                raise
            if export == "always" or (export == "missing" and not self.graphml_path().exists()):
                self._export_graphml(only_if_nonempty=export == "missing")

    def _export_graphml(self, *, only_if_nonempty: bool = False) -> None:
        gs = self.rag.chunk_entity_relation_graph
        if only_if_nonempty and gs.number_of_nodes() == 0:
            return
        try:
            gs.export_graphml(self.graphml_path())
        except OSError as exc:  # the commit stands; the export is derived data
            log.warning("could not write %s: %s", self.graphml_path(), exc)

    def _mark_stale(self) -> None:
        if self.communities.get("built"):
            self.communities["stale"] = True

    # ---------------------------------------------------------------- public API

    def doc_ids(self) -> set[str]:
        """The ids of the indexed notes.

        Returns:
            Note ids (as of the last commit by any process).
        """
        with self._lock:
            self._refresh()
            return set(self.docs)

    @property
    def communities_stale(self) -> bool:
        """True when notes changed since the last :meth:`rebuild_communities` (or none ran)."""
        with self._lock:
            self._refresh()
        return bool(self.communities.get("stale")) or not self.communities.get("built")

    def upsert(self, docs: list[IndexDoc]) -> None:
        """Insert new or changed notes as one batch (one commit); unchanged notes are skipped.

        Args:
            docs: The notes.

        Raises:
            ValueError: A note id is empty or not a string (nothing is committed).
        """
        with self._write_lock():
            if _run(lambda: mutations.aupsert(self.engine, list(docs))):
                self._mark_stale()

    def remove(self, ids: list[str]) -> None:
        """Remove notes (one commit); unknown ids are ignored.

        Args:
            ids: Note ids.
        """
        with self._write_lock():
            if _run(lambda: mutations.aremove(self.engine, list(ids))):
                self._mark_stale()

    def rebuild_communities(self) -> None:
        """Cluster, regenerate every community report, and refresh the GraphML export."""
        with self._write_lock(export="always"):
            self.communities = _run(lambda: mutations.arebuild_communities(self.engine))

    def export_graphml(self) -> Path:
        """Write the current graph to :meth:`graphml_path` (O(graph)).

        Returns:
            The path written.
        """
        with self._lock, self._file_lock(fcntl.LOCK_SH):
            self._refresh()
            self.rag.chunk_entity_relation_graph.export_graphml(self.graphml_path())
        return self.graphml_path()

    def clear(self) -> None:
        """Delete everything in this index (for ``reindex --force``)."""
        with self._write_lock(export=None):
            self.db.wipe()
            self.db.invalidate()
            self.communities = {"built": False, "stale": False}
            for p in self.workdir.iterdir():
                if p.is_file() and p.name.startswith(("kv_store_", "vdb_", "graph_")):
                    p.unlink()
            legacy.remove_legacy_files(self.workdir)

    def query(self, text: str, *, mode: str = "naive", k: int = 10) -> list[tuple[str, float]]:
        """The notes most relevant to ``text``.

        Args:
            text: The query.
            mode: ``naive`` (chunk vectors), ``local`` (entities and their neighbours) or
                ``global`` (community reports; local until communities are built).
            k: How many notes to return.

        Returns:
            ``(note id, score)`` best first (empty for an empty query, ``k <= 0`` or an empty
            index).

        Raises:
            ValueError: Unknown ``mode``.
        """
        if mode not in scoring.MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if k <= 0 or not text or not text.strip():
            return []
        with self._lock:
            self._refresh()
            if not self.docs:
                return []
            vec = self._embed_query(text)
            self.chunk_to_doc.load()
            return scoring.ranked(self.engine, vec, mode, k)

    def _embed_query(self, text: str) -> np.ndarray:
        emb = self.embedder
        v = emb.embed([text]) if hasattr(emb, "embed") else _run(lambda: emb([text]))
        return np.asarray(v, dtype=np.float32)[0]
