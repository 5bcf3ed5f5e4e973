"""Benchmark the graph/vector index (reflect_jobs.index.graphrag) on generated notes.

    .venv/bin/python bench/bench_index.py                 # N = 100, 1000, 5000
    .venv/bin/python bench/bench_index.py --sizes 100 1000 --queries 20

For each N: full build (one batch of N notes into an empty workdir), upsert of +1 note,
change of 1 note, remove of 1 note (same instance), naive/local/global query latency (median of
20 warm queries), reopening the index in a new instance, open + upsert of 1 note and open +
remove of 1 note in fresh instances (what ``reindex`` does), rebuild_communities, and the size
of the files.  Single writes are medians of 5; upsert/remove of one note should cost about the
same at every N.  Prints a table to stdout (and JSON with --json).  Uses the packaged MiniLM
model; everything offline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOOLS = [
    "postgres",
    "redis",
    "kafka",
    "docker",
    "kubernetes",
    "nginx",
    "terraform",
    "ansible",
    "pytest",
    "jest",
    "webpack",
    "vite",
    "react",
    "django",
    "flask",
    "fastapi",
    "celery",
    "huey",
    "sqlite",
    "mysql",
    "mongodb",
    "elasticsearch",
    "grafana",
    "prometheus",
    "git",
    "github",
    "gitlab",
    "jenkins",
    "bazel",
    "cmake",
    "gcc",
    "clang",
    "rustc",
    "cargo",
    "npm",
    "pip",
    "poetry",
    "uv",
    "conda",
    "numpy",
    "pandas",
    "torch",
    "tensorflow",
    "spark",
    "airflow",
    "dbt",
    "snowflake",
    "bigquery",
    "s3",
    "lambda",
    "cloudfront",
    "route53",
    "vault",
    "consul",
    "etcd",
    "envoy",
    "istio",
    "helm",
    "argo",
    "jq",
    "curl",
    "ssh",
    "rsync",
    "cron",
    "systemd",
    "launchd",
    "bash",
    "zsh",
    "tmux",
    "vim",
    "emacs",
    "vscode",
]
CONCEPTS = [
    "retry",
    "backoff",
    "timeout",
    "deadlock",
    "race-condition",
    "memory-leak",
    "cache-invalidation",
    "idempotency",
    "migration",
    "schema",
    "index",
    "transaction",
    "isolation",
    "replication",
    "sharding",
    "rate-limit",
    "pagination",
    "serialization",
    "encoding",
    "timezone",
    "locale",
    "logging",
    "tracing",
    "metrics",
    "alerting",
    "feature-flag",
    "rollback",
    "canary",
    "blue-green",
    "secrets",
    "permissions",
    "authentication",
    "authorization",
    "cors",
    "csrf",
    "tls",
    "certificate",
    "dns",
    "proxy",
    "websocket",
    "streaming",
    "batching",
    "backpressure",
    "queue",
    "worker",
    "scheduler",
    "lockfile",
    "dependency",
    "versioning",
    "packaging",
    "linting",
    "formatting",
    "typing",
    "testing",
    "fixtures",
    "mocking",
    "flaky-test",
    "coverage",
    "profiling",
    "benchmark",
    "regression",
    "bisect",
    "hotfix",
]
VERBS = [
    "fails",
    "breaks",
    "hangs",
    "slows",
    "leaks",
    "crashes",
    "times-out",
    "corrupts",
    "duplicates",
    "drops",
]
FILLER = [
    "service",
    "worker",
    "pipeline",
    "build",
    "deploy",
    "suite",
    "client",
    "database",
    "queue",
    "cluster",
    "job",
]


def gen_note(i: int, rng: random.Random, unique: bool = False):
    tools = rng.sample(TOOLS, 2)
    concepts = rng.sample(CONCEPTS, 2)
    verb = rng.choice(VERBS)
    where = rng.choice(FILLER)
    title = f"{tools[0]} {concepts[0]} {verb} the {where} (case {i})"
    sents = [
        f"When {tools[0]} handled {concepts[0]}, the {where} {verb} under load.",
        f"Root cause: {concepts[1]} in {tools[1]} was misconfigured for case {i}.",
        f"Fix: adjust {tools[1]} settings, add a test for {concepts[0]}, and document it.",
    ]
    extra = [
        f"Observed {rng.choice(CONCEPTS)} with {rng.choice(TOOLS)} in the {rng.choice(FILLER)}."
        for _ in range(rng.randint(2, 8))
    ]
    text = f"# {title}\n\n" + " ".join(sents + extra) + "\n"
    ents = [{"name": t, "type": "tool", "description": f"{t} as used in case {i}"} for t in tools]
    ents += [
        {"name": c, "type": "concept", "description": f"{c} issue seen in case {i}"}
        for c in concepts
    ]
    if unique:  # one entity only this note has (an error code, a file), like real notes
        ents.append({"name": f"ERR-{i:06d}", "type": "error", "description": f"error of case {i}"})
    rels = [
        {
            "source": tools[0],
            "target": concepts[0],
            "type": "causes",
            "description": f"{tools[0]} {verb} with {concepts[0]}",
            "strength": rng.randint(1, 9),
        },
        {
            "source": tools[1],
            "target": concepts[1],
            "type": "relates_to",
            "description": f"{concepts[1]} in {tools[1]}",
            "strength": 5,
        },
    ]
    return text, {"entities": ents, "relationships": rels}


REPEAT = 5


def median_ms(fn, queries) -> float:
    fn(queries[0])  # warm
    ts = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts)


def dir_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file()) / 1e6


def run_size(
    n: int, embedder, n_queries: int, skip_communities: bool, unique: bool = False
) -> dict:
    from reflect_jobs.index.graphrag import GraphIndex, IndexDoc

    rng = random.Random(n)
    docs = [IndexDoc(f"note-{i:05d}", *gen_note(i, rng, unique)) for i in range(n)]
    wd = Path(tempfile.mkdtemp(prefix=f"bench-index-{n}-"))
    gi = GraphIndex(wd, embedder=embedder)
    res: dict = {"n": n, "workdir": str(wd)}

    t = time.perf_counter()
    gi.upsert(docs)
    res["build_s"] = time.perf_counter() - t
    g = gi.rag.chunk_entity_relation_graph.graph
    res["chunks"] = len(gi.rag.chunks_vdb)
    res["nodes"], res["edges"] = g.number_of_nodes(), g.number_of_edges()
    res["llm_calls_build"] = dict(gi.llm.calls)

    # single writes are short and wall-clock noisy on a shared machine: median of REPEAT
    before = dict(gi.llm.calls)
    ts = []
    for j in range(REPEAT):
        extra = IndexDoc(f"note-extra-{j}", *gen_note(10**6 + j, rng, unique))
        t = time.perf_counter()
        gi.upsert([extra])
        ts.append(time.perf_counter() - t)
    res["upsert1_s"] = statistics.median(ts)
    res["upsert1_report_calls"] = gi.llm.calls["report"] - before.get("report", 0)

    changed = IndexDoc(
        docs[0].id, docs[0].text + "\nUpdated: also check the retry budget.\n", docs[0].sidecar
    )
    t = time.perf_counter()
    gi.upsert([changed])
    res["change1_s"] = time.perf_counter() - t

    t = time.perf_counter()
    gi.remove([docs[1].id])
    res["remove1_s"] = time.perf_counter() - t

    qrng = random.Random(7)
    queries = [
        f"{qrng.choice(TOOLS)} {qrng.choice(VERBS)} because of {qrng.choice(CONCEPTS)}"
        for _ in range(n_queries)
    ]
    res["naive_ms"] = median_ms(lambda q: gi.query(q, mode="naive", k=10), queries)
    res["local_ms"] = median_ms(lambda q: gi.query(q, mode="local", k=10), queries)

    t = time.perf_counter()
    gi2 = GraphIndex(wd, embedder=embedder)
    res["reopen_s"] = time.perf_counter() - t
    assert gi2.doc_ids() == gi.doc_ids()
    t = time.perf_counter()
    gi2.query(queries[0], mode="naive", k=10)  # loads the chunk matrix
    res["reopen_first_naive_ms"] = (time.perf_counter() - t) * 1000

    # what `reindex` does for +1 note: a new instance, one upsert (no query cache loaded)
    ups, rems = [], []
    for j in range(REPEAT):
        extra2 = IndexDoc(f"note-extra2-{j}", *gen_note(2 * 10**6 + j, rng, unique))
        t = time.perf_counter()
        GraphIndex(wd, embedder=embedder).upsert([extra2])
        ups.append(time.perf_counter() - t)
        t = time.perf_counter()
        GraphIndex(wd, embedder=embedder).remove([extra2.id])
        rems.append(time.perf_counter() - t)
    res["open_upsert1_s"] = statistics.median(ups)
    res["open_remove1_s"] = statistics.median(rems)

    if not skip_communities:
        t = time.perf_counter()
        gi.rebuild_communities()
        res["rebuild_communities_s"] = time.perf_counter() - t
        res["communities"] = gi.communities.get("count")
        res["global_ms"] = median_ms(lambda q: gi.query(q, mode="global", k=10), queries)
    res["disk_mb"] = dir_mb(wd)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--sizes",
        nargs="+",
        default=["100", "1000", "5000"],
        help="sizes, space- or comma-separated (1000 5000 or 1000,5000)",
    )
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--no-communities", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--unique-entities",
        action="store_true",
        help="give every note one entity of its own (default: all entities are shared)",
    )
    args = ap.parse_args(argv)

    t = time.perf_counter()
    from reflect_jobs.index.embeddings import get_embedder

    emb = get_embedder()
    print(f"model load {time.perf_counter() - t:.1f}s ({emb!r})", flush=True)
    rows = []
    for n in [int(x) for arg in args.sizes for x in str(arg).split(",") if x]:
        r = run_size(n, emb, args.queries, args.no_communities, args.unique_entities)
        rows.append(r)
        print(
            f"N={n:>5}  build {r['build_s']:7.1f}s  +1 upsert {r['upsert1_s']:5.3f}s "
            f"(report calls {r['upsert1_report_calls']})  change1 {r['change1_s']:5.3f}s  "
            f"remove1 {r['remove1_s']:5.3f}s  naive {r['naive_ms']:6.1f}ms  "
            f"local {r['local_ms']:6.1f}ms  "
            + (
                f"global {r['global_ms']:6.1f}ms  communities {r['communities']} in "
                f"{r['rebuild_communities_s']:.1f}s  "
                if "global_ms" in r
                else ""
            )
            + f"reopen {r['reopen_s']:.2f}s (first naive {r['reopen_first_naive_ms']:.0f}ms)  "
            f"open+upsert1 {r['open_upsert1_s']:.3f}s  "
            f"open+remove1 {r['open_remove1_s']:.3f}s  chunks {r['chunks']} nodes {r['nodes']} "
            f"edges {r['edges']}  disk {r['disk_mb']:.1f}MB",
            flush=True,
        )
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
