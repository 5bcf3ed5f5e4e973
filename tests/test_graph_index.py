"""Graph/vector index (reflect_jobs.index.graph) against the real packaged MiniLM, offline."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

pytest.importorskip("nano_graphrag")
pytest.importorskip("sentence_transformers")

from reflect_jobs.index.graph import (  # noqa: E402
    GRAPH_FIELD_SEP,
    GraphIndex,
    IndexDoc,
    PassthroughLLM,
    sidecar_contribution,
)

REPO = Path(__file__).resolve().parents[1]

# 20 notes on distinct topics: (id, title, body, [(entity, type, description)], relationships)
NOTES = [
    (
        "pg-pool",
        "PostgreSQL connection pool exhausted",
        "Under load the service failed with 'remaining connection slots are reserved'. The pool "
        "size exceeded max_connections; lowering the pool per worker and adding pgbouncer fixed it.",
        [("PostgreSQL", "tool", "relational database"), ("pgbouncer", "tool", "connection pooler")],
        [("pgbouncer", "PostgreSQL", "pools connections to")],
    ),
    (
        "pytest-tmp",
        "Use tmp_path in pytest",
        "Tests that wrote to the repository directory collided when run in parallel. Use the "
        "tmp_path fixture so each test gets its own temporary directory.",
        [
            ("pytest", "tool", "python test runner"),
            ("tmp_path", "api", "per-test temp dir fixture"),
        ],
        [("tmp_path", "pytest", "fixture of")],
    ),
    (
        "git-rebase",
        "Interactive rebase to squash commits",
        "To clean up a feature branch before review, run git rebase -i main and mark commits as "
        "fixup; force-push with --force-with-lease rather than --force.",
        [("git", "tool", "version control"), ("force-with-lease", "flag", "safe force push")],
        [],
    ),
    (
        "docker-cache",
        "Docker layer cache busting",
        "Copying the whole source tree before pip install invalidated the layer cache on every "
        "change. Copy requirements.txt first, install, then copy the rest.",
        [("Docker", "tool", "container builds"), ("layer cache", "concept", "reused image layers")],
        [],
    ),
    (
        "redis-ttl",
        "Redis keys need a TTL",
        "Session keys were never expiring and memory grew until eviction. Always SET with EX or "
        "call EXPIRE; monitor with INFO memory.",
        [("Redis", "tool", "in-memory key value store"), ("TTL", "concept", "time to live")],
        [],
    ),
    (
        "tz-utc",
        "Store timestamps in UTC",
        "A report showed events an hour off after daylight saving changed. Store datetimes as "
        "timezone-aware UTC and convert only when displaying to the user.",
        [("UTC", "concept", "coordinated universal time"), ("datetime", "api", "python datetime")],
        [],
    ),
    (
        "k8s-oom",
        "Kubernetes pod OOMKilled",
        "The worker pod restarted repeatedly with OOMKilled. Its memory limit was below the peak of "
        "the batch job; raising the limit and streaming the input solved it.",
        [
            ("Kubernetes", "tool", "container orchestrator"),
            ("OOMKilled", "error", "out of memory kill"),
        ],
        [],
    ),
    (
        "npm-lock",
        "Commit package-lock.json",
        "CI installed different dependency versions than local machines. Commit package-lock.json "
        "and use npm ci in pipelines for reproducible installs.",
        [("npm", "tool", "node package manager"), ("package-lock.json", "file", "lockfile")],
        [],
    ),
    (
        "regex-catastrophic",
        "Catastrophic regex backtracking",
        "A validation endpoint hung on long inputs because a nested quantifier caused exponential "
        "backtracking. Rewrote the pattern without nested repetition and added an input length cap.",
        [
            ("regex", "concept", "regular expressions"),
            ("backtracking", "concept", "regex engine search"),
        ],
        [],
    ),
    (
        "ssh-agent",
        "SSH agent forwarding for deploys",
        "Deploy scripts could not pull private repos on the bastion host. Enabled ForwardAgent for "
        "that host only in ssh config instead of copying private keys.",
        [("SSH", "tool", "secure shell"), ("ForwardAgent", "setting", "agent forwarding option")],
        [],
    ),
    (
        "css-flex",
        "Centering with flexbox",
        "To center a dialog both ways, use display flex on the parent with justify-content center "
        "and align-items center; avoid absolute positioning hacks.",
        [("flexbox", "concept", "css layout model"), ("CSS", "language", "style sheets")],
        [],
    ),
    (
        "rust-borrow",
        "Rust borrow checker and mutable borrows",
        "The compiler rejected two mutable references to the vector in one scope. Split the borrow "
        "with split_at_mut or restructure so the first borrow ends before the second begins.",
        [
            ("Rust", "language", "systems language"),
            ("borrow checker", "concept", "ownership rules"),
        ],
        [],
    ),
    (
        "s3-consistency",
        "S3 listing after upload",
        "A job listed the bucket immediately after uploading and sometimes missed objects written "
        "by another region's replication. Read the object key directly instead of listing.",
        [("S3", "tool", "object storage"), ("replication", "concept", "cross region copy")],
        [],
    ),
    (
        "http-retry",
        "Retry with exponential backoff",
        "Calls to the payment API failed intermittently with 503. Added retries with exponential "
        "backoff and jitter, and made the request idempotent with an idempotency key.",
        [
            ("exponential backoff", "concept", "growing retry delay"),
            ("503", "error", "service unavailable"),
        ],
        [],
    ),
    (
        "utf8-bom",
        "UTF-8 BOM breaks CSV header",
        "The first column name of an uploaded CSV had an invisible prefix, so lookups by header "
        "failed. Open files with encoding utf-8-sig to strip the byte order mark.",
        [("BOM", "concept", "byte order mark"), ("CSV", "format", "comma separated values")],
        [],
    ),
    (
        "cron-env",
        "Cron jobs run with a minimal environment",
        "A script worked in the shell but failed from crontab because PATH lacked /usr/local/bin. "
        "Set PATH explicitly at the top of the crontab or use absolute paths.",
        [("cron", "tool", "job scheduler"), ("PATH", "setting", "executable search path")],
        [],
    ),
    (
        "sql-index",
        "Missing index on foreign key",
        "Deleting parent rows took minutes because the child table's foreign key column had no "
        "index, forcing a sequential scan per row. Adding the index made deletes instant.",
        [
            ("foreign key", "concept", "referential constraint"),
            ("index", "concept", "b-tree index"),
        ],
        [],
    ),
    (
        "asyncio-block",
        "Blocking call inside asyncio event loop",
        "Latency spiked because a synchronous requests.get ran inside an async handler and blocked "
        "the event loop. Moved it to asyncio.to_thread or use an async HTTP client.",
        [("asyncio", "library", "python async runtime"), ("event loop", "concept", "scheduler")],
        [],
    ),
    (
        "feature-flag",
        "Remove stale feature flags",
        "Old feature flags left dead branches that confused new developers. Track each flag's owner "
        "and expiry and delete the flag and its code path once fully rolled out.",
        [("feature flag", "concept", "runtime toggle")],
        [],
    ),
    (
        "log-rotation",
        "Disk full from unrotated logs",
        "The server ran out of disk because application logs were never rotated. Configured "
        "logrotate with daily rotation, compression and a retention of fourteen files.",
        [
            ("logrotate", "tool", "log rotation utility"),
            ("disk space", "concept", "storage capacity"),
        ],
        [],
    ),
]


def make_doc(nid, title, body, ents, rels) -> IndexDoc:
    return IndexDoc(
        id=nid,
        text=f"# {title}\n\n{body}\n",
        sidecar={
            "entities": [{"name": n, "type": t, "description": d} for n, t, d in ents],
            "relationships": [
                {"source": s, "target": t, "type": "relates_to", "description": d, "strength": 5}
                for s, t, d in rels
            ],
        },
    )


ALL_DOCS = [make_doc(*n) for n in NOTES]


def node_docs(gi: GraphIndex, node: str) -> set[str]:
    data = gi.rag.chunk_entity_relation_graph.graph.nodes[node]
    return {gi.chunk_to_doc.get(c, "?" + c) for c in data["source_id"].split(GRAPH_FIELD_SEP)}


@pytest.fixture(scope="module")
def embedder():
    from reflect_jobs.index.embeddings import get_embedder

    return get_embedder()


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder):
    wd = tmp_path_factory.mktemp("built")
    gi = GraphIndex(wd, embedder=embedder)
    gi.upsert(ALL_DOCS)
    return gi


@pytest.fixture
def fresh(tmp_path, embedder):
    return GraphIndex(tmp_path / "idx", embedder=embedder)


# ------------------------------------------------------------------------------ tokenizer


def test_offline_tokenizer_with_network_disabled(tmp_path):
    code = textwrap.dedent(
        """
        import socket, sys
        def _no_net(*a, **k):
            raise OSError("network disabled by test")
        socket.socket.connect = _no_net
        socket.create_connection = _no_net
        from reflect_jobs.index import offline_tiktoken
        offline_tiktoken.install(); offline_tiktoken.install()  # idempotent
        import tiktoken
        enc = tiktoken.encoding_for_model("gpt-4o")
        assert enc.name == "o200k_base", enc.name
        assert enc.decode(enc.encode("hello offline world")) == "hello offline world"
        assert tiktoken.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
        try:  # other encodings are not served from the bundle: they still try the network
            tiktoken.get_encoding("r50k_base")
        except Exception as e:
            print("OTHER-FAILED", type(e).__name__)
        else:
            print("OTHER-LOADED")
        print("OK")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIKTOKEN")}
    env.update(
        TIKTOKEN_CACHE_DIR=str(tmp_path / "ttcache"),
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        PYTHONPATH=str(REPO),
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    assert "OTHER-FAILED" in r.stdout  # r50k_base was not answered by our patch


# ------------------------------------------------------------------------------ search


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("database ran out of available connection slots when traffic was high", "pg-pool"),
        ("container killed because it used too much memory", "k8s-oom"),
        ("scheduled job cannot find executables because of environment variables", "cron-env"),
        ("hidden characters at the start of a spreadsheet file's first column", "utf8-bom"),
        ("server storage filled up with log files", "log-rotation"),
    ],
)
def test_naive_query_finds_paraphrase(built, query, expected):
    hits = built.query(query, mode="naive", k=5)
    assert hits, "no hits"
    assert hits[0][0] == expected, hits
    assert all(isinstance(s, float) for _, s in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_local_query_uses_entities_and_neighbourhood(built):
    hits = built.query("pgbouncer", mode="local", k=5)
    assert hits[0][0] == "pg-pool"
    hits = built.query("borrow checker ownership", mode="local", k=3)
    assert hits[0][0] == "rust-borrow"


def test_doc_ids_and_stdout_clean(built, fresh, capsys):
    assert built.doc_ids() == {d.id for d in ALL_DOCS}
    fresh.upsert(ALL_DOCS[:3])
    fresh.query("anything", mode="local")
    out = capsys.readouterr().out
    assert out == "", f"index wrote to stdout: {out!r}"


def test_unchanged_docs_are_skipped(fresh):
    fresh.upsert(ALL_DOCS[:4])
    before = fresh.llm.calls["extract"]
    fresh.upsert(ALL_DOCS[:4])
    assert fresh.llm.calls["extract"] == before
    assert fresh.llm.calls["report"] == 0  # clustering/reports are deferred


# ------------------------------------------------------------------------------ B13


def test_each_doc_gets_its_own_sidecar_entities_b13(fresh):
    a = IndexDoc(
        "A",
        "Note A is about the alpha subsystem and its alpha cache.",
        {"entities": [{"name": "AlphaCache", "type": "component", "description": "a"}]},
    )
    b = IndexDoc(
        "B",
        "Note B is about the beta queue.",
        {"entities": [{"name": "BetaQueue", "type": "component", "description": "b"}]},
    )
    c = IndexDoc(
        "C",
        "Note C is about the gamma scheduler. " * 60,  # several chunks
        {
            "entities": [
                {"name": "GammaScheduler", "type": "component", "description": "c"},
                {"name": "BetaQueue", "type": "component", "description": "c-uses"},
            ],
            "relationships": [
                {
                    "source": "GammaScheduler",
                    "target": "BetaQueue",
                    "description": "feeds",
                    "strength": 3,
                }
            ],
        },
    )
    fresh.upsert([a])
    fresh.upsert([c, b])  # second batch, not in corpus order
    g = fresh.rag.chunk_entity_relation_graph.graph
    assert node_docs(fresh, '"ALPHACACHE"') == {"A"}
    assert node_docs(fresh, '"BETAQUEUE"') == {"B", "C"}
    assert node_docs(fresh, '"GAMMASCHEDULER"') == {"C"}
    # C has several chunks: each carries its entities, the relationship only once
    assert len(fresh.docs["C"]["chunks"]) > 1
    assert len(node_docs(fresh, '"GAMMASCHEDULER"')) == 1
    assert g.edges['"BETAQUEUE"', '"GAMMASCHEDULER"']["weight"] == 3
    # A's node never received anything from the second batch
    assert g.nodes['"ALPHACACHE"']["description"] == '"a"'
    assert set(g.nodes) == {'"ALPHACACHE"', '"BETAQUEUE"', '"GAMMASCHEDULER"'}


def test_passthrough_never_hands_out_a_queued_sidecar():
    from nano_graphrag.prompt import PROMPTS

    llm = PassthroughLLM()
    llm.records = {"chunk-" + "0" * 32: '("entity"<|>"SOMEONE ELSE"<|>"X"<|>"y")'}
    prompt = PROMPTS["entity_extraction"].format(
        tuple_delimiter="<|>",
        record_delimiter="##",
        completion_delimiter="<|COMPLETE|>",
        entity_types="a,b",
        input_text="some unrelated text",
    )
    out = asyncio.run(llm(prompt))
    assert "SOMEONE ELSE" not in out and "unattributed" in out
    # community report / map / summary prompts get well-formed answers
    import json

    rep = PROMPTS["community_report"].format(
        input_text="-----Entities-----\n```csv\n"
        '"id",\t"entity",\t"type",\t"description",\t"degree"\n'
        '"0",\t"REDIS",\t"TOOL",\t"kv store",\t"1"\n```'
    )
    data = json.loads(asyncio.run(llm(rep)))
    assert data["title"] == "REDIS" and data["findings"]
    assert json.loads(asyncio.run(llm("q", system_prompt=PROMPTS["global_map_rag_points"]))) == {
        "points": []
    }
    summ = PROMPTS["summarize_entity_descriptions"].format(
        entity_name="X", description_list=["one", "two", "one"]
    )
    assert asyncio.run(llm(summ)) == "one; two"


def test_sidecar_values_are_escaped():
    doc = IndexDoc(
        "q",
        "text",
        {
            "entities": [
                {
                    "name": 'He said "hi"<|>##x\nnext',
                    "type": 'quo"te',
                    "description": "a<|COMPLETE|>b",
                }
            ],
            "relationships": [],
        },
    )
    con = sidecar_contribution(doc)
    assert con.entities == [['"HE SAID HI X NEXT"', '"QUO TE"', '"a b"']]
    assert con.entity_records.count("<|>") == 3 and "##" not in con.entity_records


def test_doc_without_entities_gets_placeholder(fresh):
    fresh.upsert([IndexDoc("bare-note", "# Bare\n\nA note with no sidecar at all.", {})])
    assert node_docs(fresh, '"NOTE BARE-NOTE"') == {"bare-note"}
    assert fresh.query("a note with no sidecar", mode="naive", k=1)[0][0] == "bare-note"
    assert fresh.query("a note with no sidecar", mode="local", k=1)[0][0] == "bare-note"


# ------------------------------------------------------------------------------ change / remove


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


# ------------------------------------------------------------------------------ files, communities


def test_graphml_is_valid_xml(built):
    import networkx as nx

    p = built.graphml_path()
    assert p.name == "graph_chunk_entity_relation.graphml" and p.exists()
    root = ET.parse(p).getroot()
    assert root.tag.endswith("graphml")
    g = nx.read_graphml(p)
    assert g.number_of_nodes() == built.rag.chunk_entity_relation_graph.graph.number_of_nodes()
    assert not list(p.parent.glob(".tmp-*"))  # atomic writes left no temp files


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


# ------------------------------------------------------------------------------ incremental storage


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
        from reflect_jobs.index import graph
        from tests_support_docs import DOCS
        gi = graph.GraphIndex({str(wd)!r})
        gi.upsert(DOCS)
        """
    )
    (tmp_path / "tests_support_docs.py").write_text(
        "from reflect_jobs.index.graph import IndexDoc\n"
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
        assert gi.query(q, mode=mode, k=3) == src.query(q, mode=mode, k=3), mode
    gi.remove(["pg-pool"])
    assert '"PGBOUNCER"' not in gi.rag.chunk_entity_relation_graph.graph

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "reflect_index_manifest.json").write_text("{not json")
    from reflect_jobs.index.graph import IndexFormatError

    with pytest.raises(IndexFormatError, match="reindex --force"):
        GraphIndex(broken, embedder=embedder)


GRAPHML = "graph_chunk_entity_relation.graphml"


@pytest.mark.chaos
def test_damaged_database_names_the_fix(tmp_path, embedder):
    from reflect_jobs.index.graph import IndexFormatError

    wd = tmp_path / "dmg"
    GraphIndex(wd, embedder=embedder).upsert(ALL_DOCS[:1])
    for suffix in ("-wal", "-shm"):
        Path(f"{wd / 'reflect_index.db'}{suffix}").unlink(missing_ok=True)
    (wd / "reflect_index.db").write_bytes(os.urandom(64 * 1024))
    with pytest.raises(IndexFormatError, match="reindex --force"):
        GraphIndex(wd, embedder=embedder)
