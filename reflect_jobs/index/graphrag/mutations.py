"""Per-note insert and remove over nano-graphrag's storages, and the community rebuild.

We do not use ``GraphRAG.ainsert``: it keys documents by content hash (a changed note becomes
a second doc, SPEC B13), only extracts entities for *new* content (so a queue of sidecars
handed out in corpus order lands on the wrong notes, B13), drops and regenerates every
community report and re-clusters the whole graph on every insert (B14), and has no delete.
Instead:

* Keys are derived from the note id: ``doc-md5(id)``, ``chunk-md5(doc key + chunk text)``, so a
  changed note reuses its doc key, two notes with identical text never share a chunk, and a
  replayed insert is idempotent.
* Entities come from the note's own sidecar (:mod:`.sidecars`).  The marker
  (:data:`~.passthrough.MARKER`) naming the chunk key is passed as the chunk text to
  ``extract_entities`` (the real text goes to the text-chunk store and the chunk vector DB),
  and the passthrough LLM answers with the records registered for exactly that chunk.
  Entities are attached to every chunk of the note, relationships to its first chunk (so edge
  weights equal the sidecar strength).
* :func:`aremove` deletes the note's chunks and vectors, strips its chunk ids from node/edge
  ``source_id``, drops nodes/edges left with no source, and recomputes the descriptions,
  types and weights of shared nodes/edges from the manifest entries of the notes that remain
  (and re-embeds those entities).
* Clustering and community reports are deferred to :func:`arebuild_communities`; upserts
  never cluster and make no report calls.

Every function here writes inside the caller's transaction (the façade's write lock) and
returns what changed; it does not commit.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Set

from nano_graphrag._op import extract_entities, generate_community_report
from nano_graphrag._utils import compute_mdhash_id, encode_string_by_tiktoken
from nano_graphrag.prompt import GRAPH_FIELD_SEP

from .engine import Engine
from .passthrough import MARKER
from .sidecars import (
    RECORD_DELIMITER,
    IndexDoc,
    fingerprint,
    sidecar_contribution,
    summarize_descriptions,
)


def chunk(engine: Engine, items: list[tuple[str, str]]) -> list[dict]:
    """Split texts into token chunks with nano-graphrag's chunker.

    Args:
        engine: The index engine (chunk size and overlap, tokeniser model).
        items: ``(doc key, text)`` pairs.

    Returns:
        nano-graphrag chunk dicts (``content``, ``full_doc_id``, ...), empty ones dropped.
    """
    import tiktoken

    rag = engine.rag
    enc = tiktoken.encoding_for_model(rag.tiktoken_model_name)
    tokens = enc.encode_batch([t for _, t in items], num_threads=4)
    out = rag.chunk_func(
        tokens,
        doc_keys=[k for k, _ in items],
        tiktoken_model=enc,
        overlap_token_size=engine.chunk_overlap,
        max_token_size=engine.chunk_token_size,
    )
    return [c for c in out if c["content"]]


async def aupsert(engine: Engine, docs: list[IndexDoc]) -> bool:
    """Insert new or changed notes as one batch; unchanged notes are skipped.

    Args:
        engine: The index engine.
        docs: The notes; for a repeated id the last one wins.

    Returns:
        True when any note was (re)indexed.

    Raises:
        ValueError: A note id is empty or not a string.
    """
    latest: dict[str, IndexDoc] = {}
    for d in docs:
        if not isinstance(d.id, str) or not d.id:
            raise ValueError(f"bad doc id {d.id!r}")
        latest[d.id] = d
    fps = {i: fingerprint(d) for i, d in latest.items()}
    known = engine.docs.fingerprints(list(latest))
    todo = [d for i, d in latest.items() if known.get(i) != fps[i]]
    if not todo:
        return False
    contribs = {d.id: sidecar_contribution(d) for d in todo}
    replaced = [d.id for d in todo if d.id in known]
    if replaced:
        # nodes the new versions mention are re-embedded by the insert below
        again = {e[0] for c in contribs.values() for e in c.entities}
        await aremove(engine, replaced, skip_reembed=again)

    rag = engine.rag
    items = []
    new_docs: dict[str, dict] = {}
    for d in todo:
        key = compute_mdhash_id(d.id, prefix="doc-")
        content = d.text.strip() or d.id
        new_docs[key] = {"content": content, "doc_id": d.id}
        items.append((key, content))
    key_to_doc = {compute_mdhash_id(d.id, prefix="doc-"): d for d in todo}

    chunks: dict[str, dict] = {}
    per_doc_chunks: dict[str, list[str]] = defaultdict(list)
    for c in chunk(engine, items):
        doc = key_to_doc[c["full_doc_id"]]
        ck = compute_mdhash_id(c["full_doc_id"] + "\n" + c["content"], prefix="chunk-")
        if ck in chunks:
            continue
        chunks[ck] = {**c, "doc_id": doc.id}
        per_doc_chunks[doc.id].append(ck)

    records: dict[str, str] = {}
    for did, cks in per_doc_chunks.items():
        con = contribs[did]
        for n, ck in enumerate(cks):
            parts = [con.entity_records] + ([con.relation_records] if n == 0 else [])
            records[ck] = RECORD_DELIMITER.join(p for p in parts if p)

    await rag.chunks_vdb.upsert({ck: {"content": c["content"]} for ck, c in chunks.items()})
    engine.llm.records = records
    try:
        extraction_input = {ck: {**c, "content": MARKER.format(ck)} for ck, c in chunks.items()}
        await extract_entities(
            extraction_input,
            knwoledge_graph_inst=rag.chunk_entity_relation_graph,
            entity_vdb=rag.entities_vdb,
            global_config=engine.cfg,
        )
    finally:
        engine.llm.records = {}
    await rag.full_docs.upsert(new_docs)
    await rag.text_chunks.upsert(chunks)

    for d in todo:
        con = contribs[d.id]
        engine.docs.put(
            d.id,
            {
                "key": compute_mdhash_id(d.id, prefix="doc-"),
                "fp": fps[d.id],
                "chunks": per_doc_chunks.get(d.id, []),
                "entities": con.entities,
                "edges": con.edges,
            },
        )
    engine.chunk_to_doc.put({ck: c["doc_id"] for ck, c in chunks.items()})
    return True


async def aremove(engine: Engine, ids: list[str], skip_reembed: Set[str] = frozenset()) -> bool:
    """Remove notes and everything only they contributed; recompute what they shared.

    Args:
        engine: The index engine.
        ids: Note ids; unknown ones are ignored.
        skip_reembed: Entity names not to re-embed (an upsert re-embeds them anyway).

    Returns:
        True when any note was removed.
    """
    rag = engine.rag
    gs = rag.chunk_entity_relation_graph
    docs = engine.docs
    entries: dict[str, dict] = {}
    for i in dict.fromkeys(ids):
        e = docs.get(i)
        if e is not None:
            entries[i] = e
    if not entries:
        return False
    docs.delete(list(entries))
    removed_chunks: set[str] = set()
    touched_nodes: set[str] = set()
    touched_edges: set[tuple[str, str]] = set()
    for e in entries.values():
        removed_chunks.update(e["chunks"])
        touched_nodes.update(x[0] for x in e["entities"])
        for a, b, *_ in e["edges"]:
            touched_nodes.update((a, b))
            touched_edges.add((a, b))
    engine.chunk_to_doc.delete(removed_chunks)
    rag.text_chunks.delete(removed_chunks)
    rag.full_docs.delete([e["key"] for e in entries.values()])
    rag.chunks_vdb.delete(list(removed_chunks))

    def remaining_sources(src: str) -> list[str]:
        return [s for s in src.split(GRAPH_FIELD_SEP) if s and s not in removed_chunks]

    # edges first (their recomputation reads the surviving docs)
    for a, b in sorted(touched_edges):
        data = gs.edge_data(a, b)
        if data is None:
            continue
        srcs = remaining_sources(data.get("source_id", ""))
        if not srcs:
            gs.remove_edge(a, b)
            continue
        descs, weight = [], 0.0
        for did in engine.chunk_to_doc.docs_of(srcs):
            for ea, eb, desc, w in docs[did]["edges"]:
                if (ea, eb) == (a, b):
                    descs.append(desc)
                    weight += float(w)
        data["source_id"] = GRAPH_FIELD_SEP.join(srcs)
        if descs:
            data["description"] = _merge_desc(engine, descs)
            data["weight"] = weight
        gs.put_edge(a, b, data)
    dead_entities: list[str] = []
    refresh: dict[str, dict] = {}
    for n in sorted(touched_nodes):
        data = gs.node_data(n)
        if data is None:
            continue
        srcs = remaining_sources(data.get("source_id", ""))
        if not srcs:
            gs.remove_node(n)
            dead_entities.append(n)
            continue
        types, descs, edge_descs = [], [], []
        for did in engine.chunk_to_doc.docs_of(srcs):
            doc = docs[did]
            for name, etype, desc in doc["entities"]:
                if name == n:
                    types.append(etype)
                    descs.append(desc)
            for ea, eb, desc, _w in doc["edges"]:
                if n in (ea, eb):
                    edge_descs.append(desc)
        data["source_id"] = GRAPH_FIELD_SEP.join(srcs)
        if descs:
            data["entity_type"] = sorted(Counter(types).items(), key=lambda x: (-x[1], x[0]))[0][0]
            data["description"] = _merge_desc(engine, descs)
        elif edge_descs:  # only created implicitly by relationships now
            data["entity_type"] = '"UNKNOWN"'
            data["description"] = _merge_desc(engine, edge_descs)
        gs.put_node(n, data)
        if n not in skip_reembed:
            refresh[n] = data
    if dead_entities:
        rag.entities_vdb.delete([compute_mdhash_id(n, prefix="ent-") for n in dead_entities])
    if refresh:
        await rag.entities_vdb.upsert(
            {
                compute_mdhash_id(n, prefix="ent-"): {
                    "content": n + d.get("description", ""),
                    "entity_name": n,
                }
                for n, d in refresh.items()
            }
        )
    return True


def _merge_desc(engine: Engine, descs: list[str]) -> str:
    """nano-graphrag's merge (sorted unique, joined) summarised when over its token limit."""
    merged = GRAPH_FIELD_SEP.join(sorted(set(descs)))
    limit = int(engine.cfg["entity_summary_to_max_tokens"])
    if len(merged) > limit and len(encode_string_by_tiktoken(merged)) >= limit:
        return summarize_descriptions(sorted(set(descs)))
    return merged


async def arebuild_communities(engine: Engine) -> dict:
    """Cluster the graph, regenerate every community report and re-embed the reports.

    Args:
        engine: The index engine.

    Returns:
        The new communities state: ``built``, ``stale`` (False), ``count`` and
        ``report_calls`` (passthrough report prompts answered).
    """
    rag = engine.rag
    storage = rag.chunk_entity_relation_graph
    await storage.clustering("louvain")
    await rag.community_reports.drop()
    before = engine.llm.calls["report"]
    await generate_community_report(rag.community_reports, storage, engine.cfg)
    reports = rag.community_reports._data.items()
    engine.community_vdb.clear()
    if reports:
        await engine.community_vdb.upsert(
            {f"community-{k}": {"content": v.get("report_string", "")} for k, v in reports}
        )
    return {
        "built": True,
        "stale": False,
        "count": len(reports),
        "report_calls": engine.llm.calls["report"] - before,
    }
