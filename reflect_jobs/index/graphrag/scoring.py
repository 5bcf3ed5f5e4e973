"""Query scoring: note id -> relevance for the naive, local and global modes.

Queries do not go through nano-graphrag's answer-generation path (that would need a real
model): they read the vector stores and the graph directly and score *notes*:

* naive: best chunk cosine per note;
* local: entity vectors -> the notes those entities come from, plus (at half weight) the notes
  of their one-hop graph neighbours; an entity shared by many notes counts for less;
* global: community-report vectors -> the notes of those communities, padded with (or, before
  the first :meth:`~.graph_index.GraphIndex.rebuild_communities`, replaced by) local results.

Callers hold the index lock and have loaded the chunk -> note map.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from nano_graphrag.prompt import GRAPH_FIELD_SEP

from .engine import Engine

MODES = ("naive", "local", "global")


def naive_scores(engine: Engine, vec: np.ndarray, k: int) -> dict[str, float]:
    """Each note's best chunk similarity among the top chunks.

    Args:
        engine: The index engine.
        vec: The query embedding.
        k: How many notes the caller wants (``max(4k, 20)`` chunks are searched).

    Returns:
        note id -> score.
    """
    scores: dict[str, float] = {}
    top = max(4 * k, 20)
    c2d = engine.chunk_to_doc.load()
    for ck, sim, _ in engine.rag.chunks_vdb.query_vector(vec, top):
        d = c2d.get(ck)
        if d is not None and sim > scores.get(d, -1.0):
            scores[d] = sim
    return scores


def local_scores(engine: Engine, vec: np.ndarray, k: int) -> dict[str, float]:
    """Entity vectors -> the notes those entities come from, plus (at half weight) the notes
    of their one-hop graph neighbours.  An entity shared by many notes counts for less.

    Args:
        engine: The index engine.
        vec: The query embedding.
        k: How many notes the caller wants (``max(2k, 20)`` entities are searched).

    Returns:
        note id -> score.
    """
    gs = engine.rag.chunk_entity_relation_graph
    c2d = engine.chunk_to_doc.load()
    memo: dict[str, list[str]] = {}

    def node_docs(node: str) -> list[str]:
        if node not in memo:
            data = gs.node_data(node)
            out: dict[str, None] = {}
            for ck in (data or {}).get("source_id", "").split(GRAPH_FIELD_SEP):
                d = c2d.get(ck)
                if d is not None:
                    out[d] = None
            memo[node] = list(out)
        return memo[node]

    direct: dict[str, float] = defaultdict(float)
    hood: dict[str, float] = defaultdict(float)
    hits = engine.rag.entities_vdb.query_vector(vec, max(2 * k, 20))
    for rank, (_id, sim, meta) in enumerate(hits):
        name = meta.get("entity_name")
        if not name:
            continue
        docs = node_docs(name)
        if not docs:
            continue
        w = sim / (1.0 + math.log(len(docs)))
        for d in docs:
            direct[d] += w
        if rank >= 10:
            continue
        # heaviest 25 neighbours; ties by name (independent of storage order)
        nbrs = [
            nb
            for nb, _ in sorted(
                gs.neighbours(name), key=lambda x: (-float(x[1].get("weight", 1.0)), x[0])
            )[:25]
        ]
        for nb in nbrs:
            nd = node_docs(nb)
            if not nd:
                continue
            wn = 0.5 * sim / (1.0 + math.log(len(nd)))
            for d in nd:
                hood[d] = max(hood[d], wn)
    out = dict(direct)
    for d, s in hood.items():
        out[d] = out.get(d, 0.0) + s
    return out


def global_scores(engine: Engine, vec: np.ndarray, k: int) -> dict[str, float]:
    """Community reports (if built) -> their notes; padded/fallen back with local.

    Args:
        engine: The index engine.
        vec: The query embedding.
        k: How many notes the caller wants (fewer community hits are padded with local ones,
            ranked below every community hit).

    Returns:
        note id -> score.
    """
    local = local_scores(engine, vec, k)
    reports = engine.rag.community_reports.cached()
    if not reports or len(engine.community_vdb) == 0:
        return local
    scores: dict[str, float] = {}
    for cid, sim, _ in engine.community_vdb.query_vector(vec, 5):
        rep = reports.get(cid.removeprefix("community-"))
        if not rep:
            continue
        for d in engine.chunk_to_doc.docs_of(rep.get("chunk_ids", [])):
            # community similarity first, local relevance breaks ties inside a community
            s = sim + 0.01 * local.get(d, 0.0)
            if s > scores.get(d, -1.0):
                scores[d] = s
    if len(scores) < k and local:
        # pad with local results, ranked below every community hit
        floor = min(scores.values(), default=1.0)
        top_local = max(local.values()) or 1.0
        for d, s in local.items():
            if d not in scores:
                scores[d] = 0.5 * floor * (s / top_local)
    return scores


_SCORERS = {"naive": naive_scores, "local": local_scores, "global": global_scores}


def ranked(engine: Engine, vec: np.ndarray, mode: str, k: int) -> list[tuple[str, float]]:
    """The top ``k`` notes for a query embedding.

    Args:
        engine: The index engine.
        vec: The query embedding.
        mode: One of :data:`MODES`.
        k: How many notes to return.

    Returns:
        ``(note id, score)`` best first; ties by note id.
    """
    scores = _SCORERS[mode](engine, vec, k)
    ranked_ = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(d, float(s)) for d, s in ranked_[:k]]
