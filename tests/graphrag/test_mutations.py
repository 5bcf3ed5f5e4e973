"""Per-note upsert/remove and the deferred community rebuild (B13, B14)."""

from __future__ import annotations

import sys

from graph_notes import ALL_DOCS, NOTES, IndexDoc, make_doc, node_docs


def test_unchanged_docs_are_skipped(fresh):
    fresh.upsert(ALL_DOCS[:4])
    before = fresh.llm.calls["extract"]
    fresh.upsert(ALL_DOCS[:4])
    assert fresh.llm.calls["extract"] == before
    assert fresh.llm.calls["report"] == 0  # clustering/reports are deferred


def test_changed_doc_replaces_old_version(fresh):
    old = IndexDoc(
        "x",
        "The zanzibar quokka migration happens every spring.",
        {"entities": [{"name": "Quokka", "type": "animal", "description": "marsupial"}]},
    )
    other = ALL_DOCS[0]
    fresh.upsert([old, other])
    assert fresh.query("zanzibar quokka migration", mode="naive", k=1)[0][0] == "x"
    new = IndexDoc(
        "x",
        "Tide tables for the harbour are published weekly.",
        {"entities": [{"name": "Harbour", "type": "place", "description": "port"}]},
    )
    fresh.upsert([new])
    assert fresh.doc_ids() == {"x", other.id}
    chunks = fresh.rag.text_chunks._data
    assert not any("quokka" in c["content"].lower() for c in chunks.values())
    assert len(fresh.rag.chunks_vdb) == len(chunks) == len(fresh.chunk_to_doc)
    assert len(fresh.rag.full_docs._data) == 2
    g = fresh.rag.chunk_entity_relation_graph.graph
    assert '"QUOKKA"' not in g and node_docs(fresh, '"HARBOUR"') == {"x"}
    hits = dict(fresh.query("zanzibar quokka migration", mode="naive", k=5))
    assert hits.get("x", 0.0) < 0.3  # only the unrelated new text could match
    assert fresh.query("harbour tide tables", mode="naive", k=1)[0][0] == "x"


def test_remove_leaves_no_trace(fresh):
    shared = ("PostgreSQL", "tool", "used by the importer")
    d1 = make_doc(*NOTES[0])  # pg-pool: PostgreSQL, pgbouncer (+edge)
    d2 = IndexDoc(
        "importer",
        "# Bulk importer\n\nThe importer loads CSV files with COPY.",
        {"entities": [{"name": n, "type": t, "description": d} for n, t, d in [shared]]},
    )
    fresh.upsert([d1, d2, ALL_DOCS[4]])
    fresh.rebuild_communities()
    n_ent = len(fresh.rag.entities_vdb)
    fresh.remove(["pg-pool"])
    assert fresh.doc_ids() == {"importer", ALL_DOCS[4].id}
    for mode in ("naive", "local", "global"):
        hits = fresh.query("pgbouncer connection pool exhausted max_connections", mode=mode, k=10)
        assert "pg-pool" not in {d for d, _ in hits}, (mode, hits)
    g = fresh.rag.chunk_entity_relation_graph.graph
    assert '"PGBOUNCER"' not in g  # orphan entity gone, with its edge
    assert g.number_of_edges() == 0
    assert node_docs(fresh, '"POSTGRESQL"') == {"importer"}  # shared entity kept
    assert g.nodes['"POSTGRESQL"']["description"] == '"used by the importer"'
    assert len(fresh.rag.entities_vdb) == n_ent - 1
    assert not any(c["doc_id"] == "pg-pool" for c in fresh.rag.text_chunks._data.values())
    assert len(fresh.rag.chunks_vdb) == len(fresh.rag.text_chunks._data)
    assert fresh.communities_stale
    fresh.remove(["no-such-id"])  # no-op


def test_rebuild_communities_without_graspologic(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "graspologic", None)  # any import of it now fails
    docs = ALL_DOCS[:6] + [
        IndexDoc(
            "pg-2",
            "Vacuum PostgreSQL tables regularly to avoid bloat.",
            {
                "entities": [
                    {"name": "PostgreSQL", "type": "tool", "description": "db"},
                    {"name": "VACUUM", "type": "command", "description": "gc"},
                ],
                "relationships": [
                    {
                        "source": "VACUUM",
                        "target": "PostgreSQL",
                        "description": "maintains",
                        "strength": 8,
                    }
                ],
            },
        )
    ]
    fresh.upsert(docs)
    assert fresh.llm.calls["report"] == 0
    assert fresh.query("pgbouncer", mode="global", k=3)  # falls back to local before a build
    fresh.rebuild_communities()
    assert fresh.communities["built"] and not fresh.communities_stale
    reports = fresh.rag.community_reports._data
    assert reports and all(r["report_json"]["title"] for r in reports.values())
    hits = fresh.query("database connection pooling and vacuum", mode="global", k=5)
    assert {"pg-pool", "pg-2"} <= {d for d, _ in hits[:3]}
    calls = fresh.llm.calls["report"]
    fresh.upsert([ALL_DOCS[10]])  # deferred: no re-clustering, no report calls
    assert fresh.llm.calls["report"] == calls and fresh.communities_stale
