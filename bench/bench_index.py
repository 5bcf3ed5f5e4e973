"""The graph/vector index alone (nano-graphrag on SQLite storages), by KB size.

Run: .venv/bin/python bench/bench_index.py [--sizes 241,1000,5000] [--no-communities]

For each size N it writes the natural corpus of ``bench/corpus.py`` (hand-written notes,
then variations) into a temporary KB, reads the notes and sidecars back as ``reindex`` does,
and drives ``GraphIndex`` directly: full build (one batch of N notes into an empty
workdir), +1 upsert, change of 1 note and remove of 1 note on the open instance, open +
upsert 1 and open + remove 1 in fresh instances (what ``reindex`` does per call), naive and
local query latency and hit@5 over the labelled queries, reopen, community rebuild and
global query latency, and the size of the files. Single writes are medians of 5.

Every figure is printed beside the same figure at the smallest N of this run (how it
scales; the KB grows N / N0 times). Uses the packaged MiniLM model; everything offline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import corpus  # noqa: E402

from reflect_jobs import kb  # noqa: E402
from reflect_jobs.index import maintenance  # noqa: E402
from reflect_jobs.index.embeddings import get_embedder  # noqa: E402
from reflect_jobs.index.graph import GraphIndex, IndexDoc  # noqa: E402

REPEAT = 5
NOW = "2026-11-30T00:00:00Z"


def index_docs(notes: list[dict], where: Path) -> tuple[list[IndexDoc], dict[str, str]]:
    """Write ``notes`` as a KB under ``where`` and read them back as ``reindex`` does.

    Returns:
        The index documents, and each note's slug mapped to its note id.
    """
    ids = {}
    for note in notes:
        written = kb.write_learning(
            where, corpus.learning(note), created=NOW, updated=NOW, source_path="bench",
            session_id="bench",
        )  # fmt: skip
        ids[note["slug"]] = written.id
    docs = []
    for path in kb.iter_notes(where):
        parsed = kb.parse_note(path.read_text(encoding="utf-8"))
        sidecar = kb.load_sidecar(path.with_name(path.stem + ".entities.yaml"))
        docs.append(IndexDoc(parsed.id, maintenance._doc_text(parsed), sidecar))
    return docs, ids


def median_ms(fn: Callable[[str], object], queries: list[str]) -> float:
    fn(queries[0])  # warm
    ts = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts)


def hit5(gi: GraphIndex, mode: str, queries: list[dict], ids: dict[str, str]) -> float:
    got = [ids[q["note"]] in [d for d, _ in gi.query(q["query"], mode=mode, k=5)] for q in queries]
    return sum(got) / len(got)


def median_s(fn: Callable[[int], object]) -> float:
    ts = []
    for j in range(REPEAT):
        t = time.perf_counter()
        fn(j)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def dir_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file()) / 1e6


def run_size(n: int, embedder, queries: list[dict], communities: bool) -> dict:  # type: ignore[no-untyped-def]
    """Build and measure one index of ``n`` notes; return its figures."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-index-{n}-"))
    try:
        return _run_size(tmp, n, embedder, queries, communities)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_size(tmp: Path, n: int, embedder, queries: list[dict], communities: bool) -> dict:  # type: ignore[no-untyped-def]
    docs, ids = index_docs(corpus.corpus(n), tmp / "kb")
    extras, _ = index_docs(corpus.extra_notes(2 * REPEAT), tmp / "extra")
    wd = tmp / "graph"
    gi = GraphIndex(wd, embedder=embedder)
    res: dict = {"n": n}

    t = time.perf_counter()
    gi.upsert(docs)
    res["build"] = time.perf_counter() - t
    g = gi.rag.chunk_entity_relation_graph.graph
    res["nodes"], res["edges"] = g.number_of_nodes(), g.number_of_edges()

    before = gi.llm.calls.get("report", 0)
    res["upsert1"] = median_s(lambda j: gi.upsert([extras[j]]))
    res["report_calls"] = gi.llm.calls.get("report", 0) - before
    changed = IndexDoc(docs[0].id, docs[0].text + "\nUpdated: checked again.\n", docs[0].sidecar)
    t = time.perf_counter()
    gi.upsert([changed])
    res["change1"] = time.perf_counter() - t
    t = time.perf_counter()
    gi.remove([docs[1].id])
    res["remove1"] = time.perf_counter() - t

    texts = [q["query"] for q in queries]
    live = [q for q in queries if ids[q["note"]] != docs[1].id]
    for mode in ("naive", "local"):
        res[mode] = median_ms(lambda q, m=mode: gi.query(q, mode=m, k=10), texts)
        res[f"{mode}_hit5"] = hit5(gi, mode, live, ids)

    t = time.perf_counter()
    gi2 = GraphIndex(wd, embedder=embedder)
    res["reopen"] = time.perf_counter() - t
    if gi2.doc_ids() != gi.doc_ids():
        raise RuntimeError("reopened index holds other documents")

    # what `reindex` does for one changed note: a new instance, one upsert or remove
    res["open_upsert1"] = median_s(
        lambda j: GraphIndex(wd, embedder=embedder).upsert([extras[REPEAT + j]])
    )
    res["open_remove1"] = median_s(
        lambda j: GraphIndex(wd, embedder=embedder).remove([extras[REPEAT + j].id])
    )
    if communities:
        t = time.perf_counter()
        gi.rebuild_communities()
        res["communities_s"] = time.perf_counter() - t
        res["communities"] = gi.communities.get("count")
        res["global"] = median_ms(lambda q: gi.query(q, mode="global", k=10), texts)
    res["disk_mb"] = dir_mb(wd)
    return res


FIGURES = [  # key, label, format
    ("build", "full build", "{:.1f} s"),
    ("upsert1", "+1 upsert", "{:.3f} s"),
    ("change1", "change 1", "{:.3f} s"),
    ("remove1", "remove 1", "{:.3f} s"),
    ("open_upsert1", "open + upsert 1", "{:.3f} s"),
    ("open_remove1", "open + remove 1", "{:.3f} s"),
    ("reopen", "reopen", "{:.2f} s"),
    ("naive", "naive query median", "{:.1f} ms"),
    ("local", "local query median", "{:.1f} ms"),
    ("global", "global query median", "{:.1f} ms"),
    ("communities_s", "community rebuild", "{:.1f} s"),
    ("disk_mb", "files", "{:.1f} MB"),
]


def report(rows: list[dict]) -> None:
    base = rows[0]
    sizes = " | ".join(f"N = {r['n']:,} | vs N0" for r in rows)
    print(f"\n| | {sizes} |")
    print("|---|" + "---:|---:|" * len(rows))
    for key, label, fmt in FIGURES:
        if key not in base:
            continue
        cells = [f"{fmt.format(r[key])} | {r[key] / base[key]:.2f}x" for r in rows]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (("naive_hit5", "naive hit@5"), ("local_hit5", "local hit@5")):
        print(f"| {label} | " + " | ".join(f"{r[key]:.2f} | " for r in rows) + " |")
    print(
        "| graph nodes / edges | "
        + " | ".join(f"{r['nodes']:,} / {r['edges']:,} | " for r in rows)
        + " |"
    )
    print(
        "| community-report calls on +1 upsert | "
        + " | ".join(f"{r['report_calls']} | " for r in rows)
        + " |"
    )


def main(argv: list[str] | None = None) -> int:
    n_base = len(corpus.load_notes())
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default=f"{n_base},1000,5000", help="comma-separated KB sizes")
    ap.add_argument("--no-communities", action="store_true")
    args = ap.parse_args(argv)
    queries = corpus.load_queries()
    flag = " --no-communities" if args.no_communities else ""
    print(f"$ .venv/bin/python bench/bench_index.py --sizes {args.sizes}{flag}\n")
    t = time.perf_counter()
    emb = get_embedder()
    print(f"model load {time.perf_counter() - t:.1f} s ({emb!r}); {len(queries)} queries")
    rows = []
    for n in (int(x) for x in args.sizes.split(",") if x):
        rows.append(run_size(n, emb, queries, not args.no_communities))
        r = rows[-1]
        print(
            f"N={n}: build {r['build']:.1f} s, +1 upsert {r['upsert1']:.3f} s,"
            f" naive {r['naive']:.1f} ms, local {r['local']:.1f} ms",
            flush=True,
        )
    report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
