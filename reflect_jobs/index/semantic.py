"""Embedding-similarity lookups used by the pipeline (not by search).

Two questions, both answered from the graph/vector index's chunk vectors so no second
embedding store exists: "which existing learnings are about this?" (the revision block,
beside the lexical overlap) and "is this CREATE a near-twin of an existing learning?"
(cosine ≥ ``REFLECT_DEDUP_THRESHOLD``, SPEC-drain §3.7 C1 — then it becomes an UPDATE).

Everything here fails open: no index yet, vectors disabled, or any index error means "no
match", never a failed job — the lexical path and the ledger still work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reflect_jobs import kb

_cache: dict[str, Any] = {}
_lock = threading.Lock()
#: Where :func:`similar` sends its lookups instead of loading the model in this process: the
#: worker's model service sets it (``warm.supervisor.activate``, ARCHITECTURE §8.1), so the
#: index never imports the layer above it.
_remote: Callable[..., dict[str, Any]] | None = None


def route_to(call: Callable[..., dict[str, Any]] | None) -> None:
    """Send this process's similarity lookups to a model service (``None``: in-process).

    Args:
        call: ``ModelService.call``-shaped: ``call("similar", text=…, k=…, kb_path=…,
            vectors=…, embed_model=…)`` returns ``{"ok": True, "hits": [[id, cosine]…]}``.
    """
    global _remote
    _remote = call


def graph_index(kb_path: Path, *, vectors: bool, embed_model: str | None = None) -> Any | None:
    """This process's GraphIndex for the KB, or None when vectors are off or nothing is indexed.

    It is loaded once per graph directory and reloads itself when another process commits.

    Args:
        kb_path: The KB root.
        vectors: ``Settings.index_vectors``; ``False`` means no graph index at all.
        embed_model: ``Settings.embed_model``; ``None`` for the default model.

    Returns:
        The cached :class:`~reflect_jobs.index.graphrag.GraphIndex`, or ``None`` when vectors
        are off or ``index/graph/`` is missing or empty.
    """
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
    """Note ids by cosine similarity of their best chunk to ``text`` (best first).

    Args:
        kb_path: The KB root.
        text: What to compare with; blank text matches nothing.
        k: At most this many ids.
        vectors: ``Settings.index_vectors``; ``False`` matches nothing.
        embed_model: ``Settings.embed_model``; ``None`` for the default model.

    Returns:
        ``(note_id, cosine)`` pairs, best first; empty when there is no index or any index
        error occurred (fail open).
    """
    if not text.strip():
        return []
    remote = _remote
    if remote is not None and vectors:  # a consumer: the model lives in its child (§8.1)
        try:
            answer = remote(
                "similar",
                text=text,
                k=k,
                kb_path=str(kb_path),
                vectors=vectors,
                embed_model=embed_model,
            )
        except Exception:  # noqa: BLE001 - fail open (see module docstring)
            return []
        return [(d, float(sc)) for d, sc in answer.get("hits") or []] if answer.get("ok") else []
    try:
        index = graph_index(kb_path, vectors=vectors, embed_model=embed_model)
        return [] if index is None else index.query(text, mode="naive", k=k)
    except Exception:  # noqa: BLE001 - fail open (see module docstring)
        return []


def learning_text(learning: dict[str, Any]) -> str:
    """The same shape the index embeds for a note (title + key fields), for a fair cosine.

    Args:
        learning: A learning (the model's dict or a note's frontmatter).

    Returns:
        ``"<key>: <value>"`` lines for whichever of ``title``, ``key_insight``, ``problem``,
        ``root_cause``, ``fix`` and ``rule`` are non-empty, in that order.
    """
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
    """The existing learning this one restates, if any (threshold ≥ 1.0 disables the check).

    Args:
        kb_path: The KB root.
        learning: The new learning (a CREATE action).
        threshold: The cosine at or above which it counts as a twin.
        vectors: ``Settings.index_vectors``; ``False`` finds no twin.
        embed_model: ``Settings.embed_model``; ``None`` for the default model.

    Returns:
        ``(note_id, cosine)`` of the nearest existing note when it reaches ``threshold``,
        else ``None`` (also when there is no index).
    """
    if threshold >= 1.0:
        return None
    hits = similar(kb_path, learning_text(learning), k=1, vectors=vectors, embed_model=embed_model)
    if hits and hits[0][1] >= threshold:
        return hits[0]
    return None
