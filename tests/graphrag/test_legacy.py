"""The one-off format-1 migration (reflect_jobs.index.graphrag.legacy), and its removal date.

Delete this module together with ``legacy.py`` (docs/DEPRECATIONS.md)."""

from __future__ import annotations

import datetime as dt

import pytest
from graph_notes import ALL_DOCS, GRAPHML, REPO, GraphIndex

from reflect_jobs.index.graphrag import IndexFormatError, legacy


def test_old_whole_file_format_is_migrated(tmp_path, embedder):
    """A format-1 workdir (manifest + JSON KV + nano-vectordb JSON + GraphML) is imported."""
    import base64
    import json

    import networkx as nx
    import numpy as np

    src = GraphIndex(tmp_path / "src", embedder=embedder)
    src.upsert(ALL_DOCS[:5])
    src.rebuild_communities()
    old = tmp_path / "old"
    old.mkdir()
    (old / "reflect_index_manifest.json").write_text(
        json.dumps(
            {
                "version": 1,
                "settings": {"embedding_dim": embedder.dim},
                "communities": src.communities,
                "docs": dict(src.docs.items()),
            }
        )
    )
    for ns in ("full_docs", "text_chunks", "community_reports"):
        store = getattr(src.rag, ns)._data
        (old / f"kv_store_{ns}.json").write_text(json.dumps(dict(store.items())))
    for ns, vdb in (
        ("chunks", src.rag.chunks_vdb),
        ("entities", src.rag.entities_vdb),
        ("communities", src.community_vdb),
    ):
        vdb._load()
        n = len(vdb._ids)
        data = [{"__id__": i, **m} for i, m in zip(vdb._ids, vdb._meta, strict=True)]
        mat = np.ascontiguousarray(vdb._mat[:n])
        (old / f"vdb_{ns}.json").write_text(
            json.dumps(
                {
                    "embedding_dim": embedder.dim,
                    "data": data,
                    "matrix": base64.b64encode(mat.tobytes()).decode(),
                }
            )
        )
    nx.write_graphml(src.rag.chunk_entity_relation_graph.graph, old / GRAPHML)

    gi = GraphIndex(old, embedder=embedder)
    assert not (old / "reflect_index_manifest.json").exists()
    assert not list(old.glob("*.json")) and (old / GRAPHML).exists()
    assert gi.doc_ids() == src.doc_ids()
    assert gi.communities["built"] and not gi.communities_stale
    q = "connection pool exhausted"
    for mode in ("naive", "local", "global"):
        got, want = gi.query(q, mode=mode, k=3), src.query(q, mode=mode, k=3)
        assert [d for d, _ in got] == [d for d, _ in want], mode
        # the import re-normalises the float32 vectors: scores agree up to float noise
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5), mode
    gi.remove(["pg-pool"])
    assert '"PGBOUNCER"' not in gi.rag.chunk_entity_relation_graph.graph

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "reflect_index_manifest.json").write_text("{not json")
    with pytest.raises(IndexFormatError, match="reindex --force"):
        GraphIndex(broken, embedder=embedder)


def test_legacy_migration_is_deleted_on_schedule():
    """Fails once REMOVE_AFTER has passed: delete legacy.py as docs/DEPRECATIONS.md says."""
    assert dt.date.today() <= legacy.REMOVE_AFTER, (
        f"the format-1 index migration was due for removal after {legacy.REMOVE_AFTER}: delete "
        "reflect_jobs/index/graphrag/legacy.py and tests/graphrag/test_legacy.py "
        "(see docs/DEPRECATIONS.md)"
    )
    deprecations = (REPO / "docs" / "DEPRECATIONS.md").read_text(encoding="utf-8")
    assert legacy.REMOVE_AFTER.isoformat() in deprecations
    assert "reflect_jobs/index/graphrag/legacy.py" in deprecations
