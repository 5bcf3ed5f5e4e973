"""KB index benchmark: full rebuild, +1 note reindex, search latency and hit@k, by KB size.

Run: .venv/bin/python bench/bench_kb.py [--sizes 241,1000,5000] [--no-vectors]

For each size N it writes N notes with sidecars through ``kb.write_learning`` (the natural
corpus of ``bench/corpus.py``: the hand-written notes, then variations of them), builds the
index from scratch (``reindex --force``). With every KB built, it then five times adds one
note to each KB and reindexes it (incremental) and reindexes again with no change (medians
of the five), and runs the labelled queries of ``bench/data/retrieval_queries.jsonl`` warm,
k = 5, in lexical (SQLite FTS5), vector (nano-graphrag ``naive``, offline MiniLM) and hybrid
(RRF) mode on each KB, reporting hit@1 / hit@5 and latency.

Ratios, all measured in this run: each time against the same figure at the smallest N (how
it scales; the KB grows N / N0 times), and each mode's search latency against lexical
search at the same N. The single writes and the queries take the KBs in turn (one round
over all sizes, then the next), so a load change on the shared machine hits every size
alike; the full rebuilds cannot be interleaved, so their ratio is the least reliable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import corpus  # noqa: E402

from reflect_jobs import kb  # noqa: E402
from reflect_jobs.index import maintenance  # noqa: E402
from reflect_jobs.index.search import search  # noqa: E402

NOW = "2026-11-30T00:00:00Z"
REPEAT = 5


def write(path: Path, note: dict) -> str:
    """Write one corpus note into the KB at ``path``; return its note id."""
    written = kb.write_learning(
        path,
        corpus.learning(note),
        created=NOW,
        updated=NOW,
        source_path="bench",
        session_id="bench",
    )
    return written.id


def timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(int(len(xs) * 0.95) - 1, 0)]


@dataclass
class Built:
    """One KB of the run: where it is, its note ids by slug, and its figures so far."""

    n: int
    path: Path
    ids: dict[str, str]
    figures: dict = field(default_factory=dict)


def build(n: int, vectors: bool) -> Built:
    """Write a KB of ``n`` notes and time its full rebuild."""
    path = Path(tempfile.mkdtemp(prefix="rjkb"))
    kb_ = Built(n, path, {note["slug"]: write(path, note) for note in corpus.corpus(n)})
    stats, full = timed(lambda: maintenance.reindex(path, force=True, vectors=vectors))
    kb_.figures.update(n=n, graph=stats.graph, full=full)
    return kb_


def single_writes(kbs: list[Built], vectors: bool) -> None:
    """+1 note and no-change reindex, REPEAT rounds, the KBs taken in turn in each round."""
    inc: dict[int, list[float]] = {k.n: [] for k in kbs}
    noop: dict[int, list[float]] = {k.n: [] for k in kbs}
    for extra in corpus.extra_notes(REPEAT):
        for k in kbs:
            write(k.path, extra)
            inc_stats, seconds = timed(lambda k=k: maintenance.reindex(k.path, vectors=vectors))
            inc[k.n].append(seconds)
            noop_stats, seconds = timed(lambda k=k: maintenance.reindex(k.path, vectors=vectors))
            noop[k.n].append(seconds)
            if inc_stats.inserted != 1 or noop_stats.inserted != 0:
                raise RuntimeError(f"unexpected reindex: {inc_stats} / {noop_stats}")
    for k in kbs:
        k.figures.update(inc=statistics.median(inc[k.n]), noop=statistics.median(noop[k.n]))


def searches(kbs: list[Built], queries: list[dict], modes: list[str]) -> None:
    """Every labelled query in every mode on every KB, taken in turn; hit@k and latency."""
    lat = {(k.n, m): [] for k in kbs for m in modes}
    hits = {(k.n, m): [0, 0] for k in kbs for m in modes}
    for k in kbs:
        search(k.path, "warm up", mode=modes[-1], k=5, vectors=modes[-1] != "lexical")
    for q in queries:
        for k in kbs:
            want = k.ids[q["note"]]
            for mode in modes:
                t0 = time.perf_counter()
                res = search(k.path, q["query"], mode=mode, k=5, vectors=mode != "lexical")
                lat[k.n, mode].append((time.perf_counter() - t0) * 1000)
                got = [h["id"] for h in res.hits]
                hits[k.n, mode][0] += got[:1] == [want]
                hits[k.n, mode][1] += want in got
    for k in kbs:
        for mode in modes:
            xs = lat[k.n, mode]
            k.figures[mode] = {
                "hit1": hits[k.n, mode][0] / len(queries),
                "hit5": hits[k.n, mode][1] / len(queries),
                "median": statistics.median(xs),
                "p95": p95(xs),
            }


def report(rows: list[dict], modes: list[str], n_queries: int) -> None:
    base = rows[0]
    print(f"\n### reindex (ratio to N = {base['n']:,}, measured in this run)")
    print("| notes | N / N0 | full rebuild | ratio | +1 note reindex | ratio |", end="")
    print(" no-change reindex | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['n'] / base['n']:.1f}x | {r['full']:.1f} s |"
            f" {r['full'] / base['full']:.2f}x | {r['inc']:.3f} s | {r['inc'] / base['inc']:.2f}x |"
            f" {r['noop']:.3f} s | {r['noop'] / base['noop']:.2f}x |"
        )
    print(f"\n### search latency, median of {n_queries} warm queries, k = 5")
    cols = [c for m in modes for c in (f"{m} median / p95", f"{m} vs N0")]
    cols += [f"{m} / lexical" for m in modes[1:]]
    print("| notes | " + " | ".join(cols) + " |")
    print("|---:|" + "---:|" * len(cols))
    for r in rows:
        cells = [
            f"{r[m]['median']:.1f} / {r[m]['p95']:.1f} ms | {r[m]['median'] / base[m]['median']:.2f}x"
            for m in modes
        ]
        vs_lex = [f"{r[m]['median'] / r['lexical']['median']:.2f}x" for m in modes[1:]]
        print(f"| {r['n']:,} | " + " | ".join(cells + vs_lex) + " |")
    print(f"\n### retrieval quality on the {n_queries} labelled queries (hit@1 / hit@5)")
    print("| notes | " + " | ".join(modes) + " |")
    print("|---:|" + "---:|" * len(modes))
    for r in rows:
        cells = [f"{r[m]['hit1']:.2f} / {r[m]['hit5']:.2f}" for m in modes]
        print(f"| {r['n']:,} | " + " | ".join(cells) + " |")


def main() -> None:
    n_base = len(corpus.load_notes())
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=f"{n_base},1000,5000")
    ap.add_argument("--no-vectors", action="store_true")
    args = ap.parse_args()
    vectors = not args.no_vectors
    queries = corpus.load_queries()
    modes = ["lexical"] + (["naive", "hybrid"] if vectors else [])
    flag = " --no-vectors" if args.no_vectors else ""
    print(f"$ .venv/bin/python bench/bench_kb.py --sizes {args.sizes}{flag}\n")
    print(
        f"KB index bench (vectors {'on' if vectors else 'off'}): {n_base} hand-written notes,"
        f" {len(queries)} labelled queries; naive = vector search"
    )
    kbs: list[Built] = []
    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            for n in (int(x) for x in args.sizes.split(",")):
                kbs.append(build(n, vectors))
                f = kbs[-1].figures
                print(f"N={n}: full rebuild {f['full']:.1f} s (graph {f['graph']})", flush=True)
            single_writes(kbs, vectors)
            searches(kbs, queries, modes)
        rows = [k.figures for k in kbs]
    finally:
        for k in kbs:
            shutil.rmtree(k.path, ignore_errors=True)
    report(rows, modes, len(queries))


if __name__ == "__main__":
    main()
