"""The graph/vector index alone (nano-graphrag on SQLite storages), by KB size.

Run: .venv/bin/python bench/bench_index.py [--sizes 241,1000,5000] [--no-communities]

For each size N it writes the natural corpus of ``bench/corpus.py`` (hand-written notes,
then variations) into a temporary KB, reads the notes and sidecars back as ``reindex`` does,
and drives ``GraphIndex`` directly: full build (one batch of N notes into an empty
workdir), +1 upsert, change of 1 note and remove of 1 note on the open instance, open +
upsert 1 and open + remove 1 in fresh instances (what ``reindex`` does per call), naive and
local query latency and hit@5 over the labelled queries, reopen, community rebuild and
global query latency and hit@5, and the size of the files. Single writes are medians of 5.

Every figure is printed beside the same figure at the smallest N of this run (how it
scales; the KB grows N / N0 times). All indexes are built first; every later measurement
takes them in turn (one round over all sizes, then the next), so a load change on the
shared machine hits every size alike; the builds cannot be interleaved. Uses the packaged
MiniLM model; everything offline.
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
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import corpus  # noqa: E402

from reflect_jobs import kb  # noqa: E402
from reflect_jobs.index import note_docs  # noqa: E402
from reflect_jobs.index.embeddings import get_embedder  # noqa: E402
from reflect_jobs.index.graphrag import GraphIndex, IndexDoc  # noqa: E402

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
        docs.append(IndexDoc(parsed.id, note_docs.doc_text(parsed), sidecar))
    return docs, ids


@dataclass
class Built:
    """One index of the run and what the measurements need of it."""

    n: int
    tmp: Path
    gi: GraphIndex
    docs: list[IndexDoc]
    ids: dict[str, str]
    extras: list[IndexDoc]
    figures: dict = field(default_factory=dict)

    @property
    def workdir(self) -> Path:
        return self.tmp / "graph"


def build(n: int, embedder) -> Built:  # type: ignore[no-untyped-def]
    """Write the KB of ``n`` notes and time one batch upsert of all of them."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-index-{n}-"))
    docs, ids = index_docs(corpus.corpus(n), tmp / "kb")
    extras, _ = index_docs(corpus.extra_notes(2 * REPEAT), tmp / "extra")
    st = Built(n, tmp, GraphIndex(tmp / "graph", embedder=embedder), docs, ids, extras)
    t = time.perf_counter()
    st.gi.upsert(docs)
    st.figures.update(n=n, build=time.perf_counter() - t)
    g = st.gi.rag.chunk_entity_relation_graph.graph
    st.figures.update(nodes=g.number_of_nodes(), edges=g.number_of_edges())
    return st


def in_turn(built: list[Built], key: str, rounds: int, fn: Callable[[Built, int], object]) -> None:
    """Time ``fn(index, round)`` for every index in turn, ``rounds`` times; store medians."""
    times: dict[int, list[float]] = {b.n: [] for b in built}
    for r in range(rounds):
        for b in built:
            t = time.perf_counter()
            fn(b, r)
            times[b.n].append(time.perf_counter() - t)
    for b in built:
        b.figures[key] = statistics.median(times[b.n])


def queries_in_turn(built: list[Built], queries: list[dict], modes: tuple[str, ...]) -> None:
    """Each labelled query in each mode on each index in turn: median ms and hit@5."""
    lat = {(b.n, m): [] for b in built for m in modes}
    hits = {(b.n, m): 0 for b in built for m in modes}
    for b in built:
        for m in modes:
            b.gi.query("warm up", mode=m, k=5)
    for q in queries:
        for b in built:
            for m in modes:
                t = time.perf_counter()
                got = [d for d, _ in b.gi.query(q["query"], mode=m, k=5)]
                lat[b.n, m].append((time.perf_counter() - t) * 1000)
                hits[b.n, m] += b.ids[q["note"]] in got
    for b in built:
        for m in modes:
            b.figures[m] = statistics.median(lat[b.n, m])
            b.figures[f"{m}_hit5"] = hits[b.n, m] / len(queries)


def dir_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file()) / 1e6


def measure(built: list[Built], embedder, queries: list[dict], communities: bool) -> None:  # type: ignore[no-untyped-def]
    """Every measurement after the builds, each taken on the indexes in turn."""
    before = {b.n: b.gi.llm.calls.get("report", 0) for b in built}
    in_turn(built, "upsert1", REPEAT, lambda b, r: b.gi.upsert([b.extras[r]]))
    for b in built:
        b.figures["report_calls"] = b.gi.llm.calls.get("report", 0) - before[b.n]

    def change(b: Built, _r: int) -> None:
        doc = b.docs[0]
        b.gi.upsert([IndexDoc(doc.id, doc.text + "\nUpdated: checked again.\n", doc.sidecar)])

    in_turn(built, "change1", 1, change)
    targets = {q["note"] for q in queries}
    spare = {b.n: next(i for slug, i in b.ids.items() if slug not in targets) for b in built}
    in_turn(built, "remove1", 1, lambda b, r: b.gi.remove([spare[b.n]]))  # not a query target
    queries_in_turn(built, queries, ("naive", "local"))

    def reopen(b: Built, _r: int) -> None:
        if GraphIndex(b.workdir, embedder=embedder).doc_ids() != b.gi.doc_ids():
            raise RuntimeError("reopened index holds other documents")

    in_turn(built, "reopen", 1, reopen)
    # what `reindex` does for one changed note: a new instance, one upsert or remove
    in_turn(
        built,
        "open_upsert1",
        REPEAT,
        lambda b, r: GraphIndex(b.workdir, embedder=embedder).upsert([b.extras[REPEAT + r]]),
    )
    in_turn(
        built,
        "open_remove1",
        REPEAT,
        lambda b, r: GraphIndex(b.workdir, embedder=embedder).remove([b.extras[REPEAT + r].id]),
    )
    if communities:
        in_turn(built, "communities_s", 1, lambda b, r: b.gi.rebuild_communities())
        queries_in_turn(built, queries, ("global",))
    for b in built:
        b.figures["disk_mb"] = dir_mb(b.workdir)


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
    for key, label in (
        ("naive_hit5", "naive hit@5"),
        ("local_hit5", "local hit@5"),
        ("global_hit5", "global hit@5"),
    ):
        if key not in base:
            continue
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
    built: list[Built] = []
    try:
        for n in (int(x) for x in args.sizes.split(",") if x):
            built.append(build(n, emb))
            print(f"N={n}: build {built[-1].figures['build']:.1f} s", flush=True)
        measure(built, emb, queries, not args.no_communities)
        rows = [b.figures for b in built]
    finally:
        for b in built:
            shutil.rmtree(b.tmp, ignore_errors=True)
    report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
