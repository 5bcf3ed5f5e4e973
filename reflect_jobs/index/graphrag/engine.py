"""nano-graphrag's ``GraphRAG`` wired to our storages, model and embedder.

What nano-graphrag gives us: its chunker, its entity-extraction parser/merger
(``extract_entities``), its community-report generator and the storage interfaces they talk
to.  We never call ``GraphRAG.ainsert`` or its query path (see :mod:`.mutations` for why); the
``GraphRAG`` object built here is only the holder of the configuration and of the storage
instances those functions take.  It is configured with:

* the SQLite storages of :mod:`reflect_jobs.index.sqlite_store` /
  :mod:`reflect_jobs.index.sqlite_vectors` as its ``key_string_value_json_storage_cls`` /
  ``vector_db_storage_cls`` / ``graph_storage_cls``, all on one shared
  :class:`~reflect_jobs.index.sqlite_store.IndexDB` connection (``addon_params["reflect_db"]``);
* the :class:`~.passthrough.PassthroughLLM` as both models (no prompt leaves the process),
  no gleaning, no LLM cache;
* louvain clustering (:mod:`reflect_jobs.index.clustering`; no graspologic) with at most
  three levels;
* caps on the text embedded per entity / community vector.

:class:`Engine` bundles that ``GraphRAG`` with the pieces our own pipeline adds: the
community-report vectors and the manifest views.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from nano_graphrag._utils import EmbeddingFunc
from nano_graphrag.graphrag import GraphRAG

from ..sqlite_graph import SQLiteGraphStorage
from ..sqlite_store import IndexDB, SQLiteKVStorage
from ..sqlite_vectors import SQLiteVectorStorage
from .manifest import ChunkDocs, DocManifest
from .passthrough import PassthroughLLM


@dataclass
class Engine:
    """Everything the insert/remove/query functions operate on, for one index.

    Attributes:
        rag: The configured ``GraphRAG`` (config holder and storage instances).
        cfg: ``asdict(rag)``, the ``global_config`` nano-graphrag's functions take.
        llm: The passthrough model ``rag`` calls.
        community_vdb: Vectors of the community reports (for global search).
        docs: The per-note manifest.
        chunk_to_doc: chunk key -> note id.
        chunk_token_size: Chunk size in tokens.
        chunk_overlap: Overlap of consecutive chunks in tokens.
    """

    rag: GraphRAG
    cfg: dict
    llm: PassthroughLLM
    community_vdb: SQLiteVectorStorage
    docs: DocManifest
    chunk_to_doc: ChunkDocs
    chunk_token_size: int
    chunk_overlap: int


def embedding_func(embedder: Any) -> EmbeddingFunc:
    """Wrap our embedder (async ``__call__``, ``dim``/``embedding_dim``) for nano-graphrag.

    Args:
        embedder: An object with ``embedding_dim`` or ``dim``, optionally ``max_token_size``,
            and an async ``__call__(texts) -> array``.

    Returns:
        nano-graphrag's ``EmbeddingFunc`` around it.
    """
    dim = int(getattr(embedder, "embedding_dim", None) or embedder.dim)
    max_tok = int(getattr(embedder, "max_token_size", 256) or 256)

    async def _embed(texts: list[str]) -> np.ndarray:
        return await embedder(texts)

    return EmbeddingFunc(embedding_dim=dim, max_token_size=max_tok, func=_embed)


def build_engine(
    workdir: Path,
    db: IndexDB,
    embedder: Any,
    *,
    chunk_token_size: int,
    chunk_overlap: int,
) -> Engine:
    """Build the ``GraphRAG`` and the storages of one index (opens no files but ``db``'s).

    Args:
        workdir: The index directory (nano-graphrag's ``working_dir``).
        db: The open index database every storage shares.
        embedder: See :func:`embedding_func`.
        chunk_token_size: Chunk size in tokens.
        chunk_overlap: Overlap in tokens (smaller than ``chunk_token_size``).

    Returns:
        The engine.
    """
    llm = PassthroughLLM()
    rag = GraphRAG(
        working_dir=str(workdir),
        enable_local=True,
        enable_naive_rag=True,
        chunk_token_size=chunk_token_size,
        chunk_overlap_token_size=chunk_overlap,
        entity_extract_max_gleaning=0,
        graph_cluster_algorithm="louvain",
        embedding_func=embedding_func(embedder),
        embedding_batch_num=256,
        embedding_func_max_async=1 << 30,
        best_model_func=llm,
        cheap_model_func=llm,
        best_model_max_async=1 << 30,
        cheap_model_max_async=1 << 30,
        key_string_value_json_storage_cls=SQLiteKVStorage,
        vector_db_storage_cls=SQLiteVectorStorage,
        graph_storage_cls=SQLiteGraphStorage,
        enable_llm_cache=False,
        addon_params={
            "max_cluster_levels": 3,
            "max_embed_chars": {"entities": 300, "communities": 1000},
            "reflect_db": db,  # shared, never deep-copied (IndexDB.__deepcopy__)
        },
    )
    cfg = asdict(rag)
    community_vdb = SQLiteVectorStorage(
        namespace="communities",
        global_config=cfg,
        embedding_func=rag.embedding_func,
    )
    return Engine(
        rag=rag,
        cfg=cfg,
        llm=llm,
        community_vdb=community_vdb,
        docs=DocManifest(db),
        chunk_to_doc=ChunkDocs(db),
        chunk_token_size=chunk_token_size,
        chunk_overlap=chunk_overlap,
    )
