"""Search over the KB: lexical (FTS5/BM25), vector/graph (nano-graphrag), or both fused.

Hybrid fuses the lexical and vector rankings with reciprocal-rank fusion (k=60): rank-based,
so BM25 scores and cosine similarities never need to share a scale. Retired and superseded
notes are filtered on every path (the lexical index filters by status; vector hits are
checked against the lexical index's metadata, which reindex keeps in step with the notes).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reflect_jobs import kb
from reflect_jobs.lifecycle import ACTIVE, PROPOSED

from .lexical import LexicalIndex

RRF_K = 60


class SearchError(RuntimeError):
    """Search cannot answer; the message says what to run."""


@dataclass
class SearchResult:
    """What :func:`search` found: hits (``id``, ``title``, ``score``, ``path``) and warnings."""

    hits: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


def rrf(rankings: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: each ranking gives the document at rank r (from 1) ``1/(k+r)``.

    Args:
        rankings: Document ids, best first, one list per retriever.
        k: The damping constant; larger flattens the advantage of the top ranks.

    Returns:
        ``(doc_id, fused score)`` for every document in any ranking, best first (ties by id).
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def staleness(kb_path: Path) -> list[str]:
    """Warn when notes changed since the last reindex (SPEC "staleness"); O(1), not O(notes).

    Args:
        kb_path: The KB root.

    Returns:
        One warning line telling the user to reindex, or an empty list.
    """
    from .maintenance import index_lags

    if index_lags(kb_path):
        return [
            "the index lags the notes (notes changed since the last reindex): run `reflect-jobs reindex`"
        ]
    return []


def search(
    kb_path: Path,
    query: str,
    *,
    mode: str = "hybrid",
    k: int = 5,
    vectors: bool,
    embed_model: str | None = None,
    repo_key: str | None = None,
    only_global: bool = False,
) -> SearchResult:
    """Search the KB's active notes; the vector leg fails open to lexical results.

    Args:
        kb_path: The KB root (its directories are created when missing).
        query: Free text.
        mode: ``hybrid`` (lexical and naive vector ranks fused), ``lexical`` (BM25 only),
            or a nano-graphrag mode, ``naive``, ``local`` or ``global`` (vector/graph only,
            lexical when the vector index is unavailable).
        k: At most this many hits.
        vectors: ``Settings.index_vectors``; ``False`` makes every mode lexical.
        embed_model: ``Settings.embed_model``; ``None`` for the default model.
        repo_key: Keep only this repository's learnings and the global ones
            (``search --repo DIR``; ARCHITECTURE §13).
        only_global: Keep only global learnings (``search --global``).

    Returns:
        Hits with ``id``, ``title``, ``score`` (``-bm25`` for ``lexical``, the RRF score
        otherwise) and ``path``, best first; warnings for a stale index or an unavailable
        vector index.

    Raises:
        SearchError: The lexical index is damaged (the message says to reindex).
    """
    try:
        return _search(
            kb_path,
            query,
            mode=mode,
            k=k,
            vectors=vectors,
            embed_model=embed_model,
            scope=scope_filter(kb_path, repo_key, only_global),
        )
    except sqlite3.DatabaseError as exc:
        raise SearchError(
            f"the lexical index is damaged ({exc}): run `reflect-jobs reindex`"
        ) from None


def scope_filter(
    kb_path: Path, repo_key: str | None, only_global: bool
) -> tuple[dict[str, tuple[str, str]], str | None] | None:
    """The scopes a filtered search needs, read once from the context store.

    Args:
        kb_path: The KB root.
        repo_key: Keep this repository's learnings and the global ones.
        only_global: Keep only global learnings.

    Returns:
        ``None`` when no filter was asked for; else ``({id: (scope, repo_key)}, wanted)``
        with ``wanted`` the repository key (``None`` for global only). An id the store does
        not know is treated as global (a note written before scopes existed).
    """
    if repo_key is None and not only_global:
        return None
    from reflect_jobs.recall import store

    scopes: dict[str, tuple[str, str]] = {}
    conn = store.open_for_read(store.store_path(kb_path))
    if conn is not None:
        try:
            scopes = {
                r[0]: (r[1], r[2])
                for r in conn.execute("SELECT id, scope, repo_key FROM notes WHERE scope='repo'")
            }
        finally:
            conn.close()
    return scopes, (None if only_global else repo_key)


def _in_scope(doc_id: str, scope: tuple[dict[str, tuple[str, str]], str | None] | None) -> bool:
    if scope is None:
        return True
    scopes, wanted = scope
    kind, key = scopes.get(doc_id, ("global", ""))
    return kind == "global" or (wanted is not None and key == wanted)


def _search(
    kb_path: Path,
    query: str,
    *,
    mode: str,
    k: int,
    vectors: bool,
    embed_model: str | None,
    scope: tuple[dict[str, tuple[str, str]], str | None] | None = None,
) -> SearchResult:
    paths = kb.kb_paths(kb_path)
    lex = LexicalIndex(paths.index / "lexical.db")
    warnings: list[str] = []
    try:
        warnings += staleness(kb_path)
        fetch = max(k * 4, 20) * (3 if scope is not None else 1)
        lexical = (
            [doc for doc, _ in lex.search(query, fetch)] if mode in ("hybrid", "lexical") else []
        )
        vector: list[str] = []
        if mode != "lexical":
            try:
                from .semantic import graph_index

                graph = graph_index(kb_path, vectors=vectors, embed_model=embed_model)
                if graph is None:
                    raise LookupError("no vector index yet (or REFLECT_INDEX_VECTORS=0)")
                gmode = "naive" if mode == "hybrid" else mode
                vector = [doc for doc, _ in graph.query(query, mode=gmode, k=fetch)]
            except Exception as exc:  # noqa: BLE001 - lexical still answers
                warnings.append(
                    f"vector index unavailable ({type(exc).__name__}: {exc}); lexical results only"
                )
                if not lexical:
                    lexical = [doc for doc, _ in lex.search(query, fetch)]
        if mode == "lexical":
            ranked = [(d, s) for d, s in lex.search(query, k if scope is None else fetch)]
        elif mode == "hybrid":
            ranked = rrf([lexical, vector])
        else:
            ranked = rrf([vector or lexical])
        hits = []
        for doc_id, score in ranked:
            meta = lex.lookup(doc_id)
            if meta is None or meta["status"] not in (ACTIVE, PROPOSED):
                continue  # unknown to the (status-aware) index, retired or superseded
            if not _in_scope(doc_id, scope):
                continue  # another repository's learning
            hit = {
                "id": doc_id,
                "title": meta["title"],
                "score": round(float(score), 6),
                "path": meta["path"],
            }
            if meta["status"] == PROPOSED:  # found, but marked: no one vouched for it yet
                hit["status"] = PROPOSED
            hits.append(hit)
            if len(hits) >= k:
                break
        return SearchResult(hits, warnings)
    finally:
        lex.close()
