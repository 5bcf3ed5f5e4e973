"""Embedding-similarity lookups used by the pipeline (not by search).

Two questions, both answered from the graph/vector index's chunk vectors so no second
embedding store exists: "which existing learnings are about this?" (the revision block,
beside the lexical overlap) and "is this CREATE a near-twin of an existing learning?"
(cosine ≥ ``REFLECT_DEDUP_THRESHOLD``, SPEC §3.7 C1 — then it becomes an UPDATE).

Everything here fails open: no index yet, vectors disabled, or any index error means "no
match", never a failed job — the lexical path and the ledger still work.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from reflect_jobs import kb

_cache: dict[str, Any] = {}
_lock = threading.Lock()


def graph_index(kb_path: Path, *, vectors: bool, embed_model: str | None = None) -> Any | None:
    """This process's GraphIndex for the KB (loaded once; it reloads itself when another
    process commits), or None when vectors are off or nothing is indexed yet."""
    if not vectors:
        return None
    graph_dir = kb.kb_paths(kb_path, create=False).graph
    if not graph_dir.is_dir() or not any(graph_dir.iterdir()):
        return None
    key = f"{graph_dir}\0{embed_model or ''}"
    with _lock:
        if key not in _cache:
            from .embeddings import get_embedder
            from .graphrag import GraphIndex

            _cache[key] = GraphIndex(graph_dir, embedder=get_embedder(embed_model))
        return _cache[key]


def similar(
    kb_path: Path, text: str, *, k: int = 5, vectors: bool, embed_model: str | None = None
) -> list[tuple[str, float]]:
    """Note ids by cosine similarity of their best chunk to ``text`` (best first)."""
    if not text.strip():
        return []
    try:
        index = graph_index(kb_path, vectors=vectors, embed_model=embed_model)
        return [] if index is None else index.query(text, mode="naive", k=k)
    except Exception:  # noqa: BLE001 - fail open (see module docstring)
        return []


def learning_text(learning: dict[str, Any]) -> str:
    """The same shape the index embeds for a note (title + key fields), for a fair cosine."""
    keys = ("title", "key_insight", "problem", "root_cause", "fix", "rule")
    return "\n".join(f"{k}: {learning.get(k)}" for k in keys if learning.get(k))


def find_twin(
    kb_path: Path,
    learning: dict[str, Any],
    threshold: float,
    *,
    vectors: bool,
    embed_model: str | None = None,
) -> tuple[str, float] | None:
    """The existing learning this one restates, if any (threshold ≥ 1.0 disables the check)."""
    if threshold >= 1.0:
        return None
    hits = similar(kb_path, learning_text(learning), k=1, vectors=vectors, embed_model=embed_model)
    if hits and hits[0][1] >= threshold:
        return hits[0]
    return None
