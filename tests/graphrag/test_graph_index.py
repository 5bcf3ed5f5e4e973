"""The GraphIndex façade: persistence, transactions, cross-process reloads, GraphML export."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from graph_notes import ALL_DOCS, REPO, GraphIndex, IndexDoc

from reflect_jobs.index.graphrag import IndexFormatError


def test_graphml_is_valid_xml(built):
    import networkx as nx

    p = built.graphml_path()
    assert p.name == "graph_chunk_entity_relation.graphml" and p.exists()
    root = ET.parse(p).getroot()
    assert root.tag.endswith("graphml")
    g = nx.read_graphml(p)
    assert g.number_of_nodes() == built.rag.chunk_entity_relation_graph.graph.number_of_nodes()
    assert not list(p.parent.glob(".tmp-*"))  # atomic writes left no temp files


def test_second_instance_sees_persisted_state(tmp_path, embedder):
    wd = tmp_path / "shared"
    gi = GraphIndex(wd, embedder=embedder)
    gi.upsert(ALL_DOCS[:8])
    gi.rebuild_communities()
    q = "session keys never expire and memory grows"
    expect = gi.query(q, mode="naive", k=3)

    gi2 = GraphIndex(wd, embedder=embedder)
    assert gi2.doc_ids() == gi.doc_ids()
    assert gi2.query(q, mode="naive", k=3) == expect
    assert gi2.query(q, mode="local", k=3)[0][0] == "redis-ttl"
    assert gi2.communities["built"] and gi2.rag.community_reports._data
    # a commit by one instance is picked up by the other before its next call
    gi2.upsert([ALL_DOCS[9]])
    gi2.remove(["redis-ttl"])
    assert gi.doc_ids() == {d.id for d in ALL_DOCS[:8]} - {"redis-ttl"} | {ALL_DOCS[9].id}
    assert "redis-ttl" not in {d for d, _ in gi.query(q, mode="naive", k=10)}


def test_sync_api_from_threads_and_inside_a_running_loop(fresh):
    errors: list[BaseException] = []

    def worker():
        try:
            fresh.upsert(ALL_DOCS[12:14])
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert not errors

    async def inside_loop():
        fresh.upsert([ALL_DOCS[14]])
        return fresh.query("retry payment api with backoff", mode="local", k=1)

    assert asyncio.run(inside_loop())[0][0] == "http-retry"
    assert fresh.doc_ids() == {"s3-consistency", "http-retry", "utf8-bom"}


def test_failed_write_rolls_back_to_last_commit(tmp_path, embedder):
    class Flaky:
        def __init__(self):
            self.fail = False
            self.dim = self.embedding_dim = embedder.dim
            self.max_token_size = 256
            self.model_name = embedder.model_name

        def embed(self, texts):
            if self.fail:
                raise RuntimeError("embedder down")
            return embedder.embed(texts)

        async def __call__(self, texts):
            return self.embed(texts)

    flaky = Flaky()
    gi = GraphIndex(tmp_path / "rb", embedder=flaky)
    gi.upsert(ALL_DOCS[:2])
    fp = gi.docs[ALL_DOCS[0].id]["fp"]
    changed = IndexDoc(ALL_DOCS[0].id, ALL_DOCS[0].text + "\nmore\n", ALL_DOCS[0].sidecar)
    flaky.fail = True
    with pytest.raises(RuntimeError):
        gi.upsert([changed, ALL_DOCS[2]])  # fails after the old version was taken out
    flaky.fail = False
    assert gi.doc_ids() == {ALL_DOCS[0].id, ALL_DOCS[1].id}
    assert gi.docs[ALL_DOCS[0].id]["fp"] == fp
    assert len(gi.rag.chunks_vdb) == len(gi.rag.text_chunks._data) == len(gi.chunk_to_doc)
    assert gi.query("database ran out of connection slots", k=1)[0][0] == "pg-pool"
    gi.upsert([changed, ALL_DOCS[2]])
    assert gi.doc_ids() == {d.id for d in ALL_DOCS[:3]}


def test_one_note_upsert_writes_rows_not_files(tmp_path, embedder):
    """+1 note touches a bounded number of rows whatever the index size, loads no read cache,
    and leaves the GraphML export alone once it exists."""
    small, big = tmp_path / "small", tmp_path / "big"
    GraphIndex(small, embedder=embedder).upsert(ALL_DOCS[:2])
    GraphIndex(big, embedder=embedder).upsert(ALL_DOCS[:19])
    extra = ALL_DOCS[19]
    changes = {}
    for wd in (small, big):
        graphml = wd / "graph_chunk_entity_relation.graphml"
        assert graphml.exists()  # written by the first commit (it was missing)
        before = graphml.stat().st_mtime_ns
        gi = GraphIndex(wd, embedder=embedder)
        n0 = gi.db.total_changes()
        gi.upsert([extra])
        changes[wd.name] = gi.db.total_changes() - n0
        gs = gi.rag.chunk_entity_relation_graph
        assert not gs.loaded and not gi.rag.chunks_vdb._loaded and not gi.rag.entities_vdb._loaded
        assert graphml.stat().st_mtime_ns == before  # no O(graph) export per insert
        assert not list(wd.glob("*.json")), "no whole-file stores any more"
        assert extra.id in gi.doc_ids()
        assert gi.query("log rotation disk full", k=1)[0][0] == extra.id
    assert changes["small"] == changes["big"], changes


@pytest.mark.chaos
def test_writer_killed_mid_transaction_leaves_last_commit(tmp_path, embedder):
    wd = tmp_path / "crash"
    gi = GraphIndex(wd, embedder=embedder)
    gi.upsert(ALL_DOCS[:3])
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from reflect_jobs.index import graphrag
        from tests_support_docs import DOCS
        gi = graphrag.GraphIndex({str(wd)!r})
        gi.upsert(DOCS)
        """
    )
    (tmp_path / "tests_support_docs.py").write_text(
        "from reflect_jobs.index.graphrag import IndexDoc\n"
        f"DOCS = [IndexDoc(*a) for a in {[(d.id, d.text, d.sidecar) for d in ALL_DOCS[3:6]]!r}]\n"
    )
    # SIGKILL once the text chunks are upserted: graph, vectors, docs already written.
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO}:{tmp_path}",
        "REFLECT_FAILPOINTS": "kv_upsert:text_chunks",
    }
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert r.returncode == -9, r.stderr[-2000:]
    gi2 = GraphIndex(wd, embedder=embedder)
    assert gi2.doc_ids() == {d.id for d in ALL_DOCS[:3]}
    assert len(gi2.rag.chunks_vdb) == len(gi2.rag.text_chunks._data) == len(gi2.chunk_to_doc)
    g = gi2.rag.chunk_entity_relation_graph.graph
    assert '"DOCKER"' not in g and '"REDIS"' not in g
    # the surviving instance notices nothing changed and keeps working
    assert gi.doc_ids() == gi2.doc_ids()
    gi.upsert(ALL_DOCS[3:6])
    assert gi2.doc_ids() == {d.id for d in ALL_DOCS[:6]}


def test_graphml_is_an_export(tmp_path, embedder):
    wd = tmp_path / "exp"
    gi = GraphIndex(wd, embedder=embedder)
    gi.upsert(ALL_DOCS[:2])
    p = gi.graphml_path()
    import networkx as nx

    assert set(nx.read_graphml(p).nodes) == set(gi.rag.chunk_entity_relation_graph.graph.nodes)
    gi.upsert(ALL_DOCS[2:4])  # the export may lag between rebuilds ...
    assert (
        len(nx.read_graphml(p).nodes) < gi.rag.chunk_entity_relation_graph.graph.number_of_nodes()
    )
    gi.rebuild_communities()  # ... and is refreshed by the periodic rebuild
    g = nx.read_graphml(p)
    assert set(g.nodes) == set(gi.rag.chunk_entity_relation_graph.graph.nodes)
    assert any("clusters" in d for _, d in g.nodes(data=True))
    p.unlink()
    gi.remove([ALL_DOCS[0].id])  # a commit that finds it missing writes it again
    assert set(nx.read_graphml(p).nodes) == set(gi.rag.chunk_entity_relation_graph.graph.nodes)
    p.write_text("garbage")  # a damaged export never affects the index
    gi2 = GraphIndex(wd, embedder=embedder)
    assert gi2.doc_ids() == {d.id for d in ALL_DOCS[1:4]}
    assert gi2.export_graphml() == p and nx.read_graphml(p).number_of_nodes() > 0


def test_reopens_after_the_directory_is_rebuilt(tmp_path, embedder):
    """reindex --force deletes the graph directory and builds a new index in it."""
    import shutil

    wd = tmp_path / "g"
    reader = GraphIndex(wd, embedder=embedder)
    reader_docs = GraphIndex(wd, embedder=embedder)
    reader_docs.upsert(ALL_DOCS[:3])
    assert reader.query("database connection slots exhausted", k=1)[0][0] == "pg-pool"
    shutil.rmtree(wd)
    wd.mkdir()
    GraphIndex(wd, embedder=embedder).upsert(ALL_DOCS[4:6])
    assert reader.doc_ids() == {d.id for d in ALL_DOCS[4:6]}
    assert reader.query("session keys never expire", k=1)[0][0] == "redis-ttl"


@pytest.mark.chaos
def test_damaged_database_names_the_fix(tmp_path, embedder):
    wd = tmp_path / "dmg"
    GraphIndex(wd, embedder=embedder).upsert(ALL_DOCS[:1])
    for suffix in ("-wal", "-shm"):
        Path(f"{wd / 'reflect_index.db'}{suffix}").unlink(missing_ok=True)
    (wd / "reflect_index.db").write_bytes(os.urandom(64 * 1024))
    with pytest.raises(IndexFormatError, match="reindex --force"):
        GraphIndex(wd, embedder=embedder)
