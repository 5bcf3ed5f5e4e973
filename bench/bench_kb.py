"""KB index benchmark: full rebuild, +1 note reindex, search latency and hit@k, by KB size.

Run: .venv/bin/python bench/bench_kb.py [--sizes 241,1000,5000] [--no-vectors]

For each size N it writes N notes with sidecars through ``kb.write_learning`` (the natural
corpus of ``bench/corpus.py``: the hand-written notes, then variations of them), builds the
index from scratch (``reindex --force``), then five times adds one note and reindexes
(incremental) and reindexes again with no change (medians of the five), then runs the
labelled queries of ``bench/data/retrieval_queries.jsonl`` warm, k = 5, in lexical (SQLite
FTS5), vector (nano-graphrag ``naive``, offline MiniLM) and hybrid (RRF) mode, and reports
hit@1 / hit@5 and latency.

Ratios, all measured in this run: each reindex and search time against the same figure at
the smallest N (how it scales; the KB grows N / N0 times), and each mode's search latency
against lexical search at the same N. Wall-clock on a shared machine: compare the ratios.
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


def bench_size(n: int, queries: list[dict], modes: list[str], vectors: bool) -> dict:
    """Build a KB of ``n`` notes and measure it; return the figures of this size."""
    tmp = Path(tempfile.mkdtemp(prefix="rjkb"))
    try:
        ids = {note["slug"]: write(tmp, note) for note in corpus.corpus(n)}
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            stats, full = timed(lambda: maintenance.reindex(tmp, force=True, vectors=vectors))
            inc, noop = [], []
            for extra in corpus.extra_notes(REPEAT):  # single writes: median of REPEAT
                write(tmp, extra)
                inc_stats, seconds = timed(lambda: maintenance.reindex(tmp, vectors=vectors))
                inc.append(seconds)
                noop_stats, seconds = timed(lambda: maintenance.reindex(tmp, vectors=vectors))
                noop.append(seconds)
                if inc_stats.inserted != 1 or noop_stats.inserted != 0:
                    raise RuntimeError(f"unexpected reindex: {inc_stats} / {noop_stats}")
            search(tmp, "warm up", mode=modes[-1], k=5)
            out: dict = {
                "n": n,
                "graph": stats.graph,
                "full": full,
                "inc": statistics.median(inc),
                "noop": statistics.median(noop),
            }
            for mode in modes:
                out[mode] = quality(tmp, mode, queries, ids)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def quality(kb_path: Path, mode: str, queries: list[dict], ids: dict[str, str]) -> dict:
    """hit@1, hit@5 and latency (ms) of ``mode`` over the labelled queries."""
    lat = []
    h1 = h5 = 0
    for q in queries:
        want = ids[q["note"]]
        t0 = time.perf_counter()
        res = search(kb_path, q["query"], mode=mode, k=5)
        lat.append((time.perf_counter() - t0) * 1000)
        got = [h["id"] for h in res.hits]
        h1 += got[:1] == [want]
        h5 += want in got
    return {
        "hit1": h1 / len(queries),
        "hit5": h5 / len(queries),
        "median": statistics.median(lat),
        "p95": p95(lat),
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
    os.environ["REFLECT_INDEX_VECTORS"] = "1" if vectors else "0"
    queries = corpus.load_queries()
    modes = ["lexical"] + (["naive", "hybrid"] if vectors else [])
    flag = " --no-vectors" if args.no_vectors else ""
    print(f"$ .venv/bin/python bench/bench_kb.py --sizes {args.sizes}{flag}\n")
    print(
        f"KB index bench (vectors {'on' if vectors else 'off'}): {n_base} hand-written notes,"
        f" {len(queries)} labelled queries; naive = vector search"
    )
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        r = bench_size(n, queries, modes, vectors)
        rows.append(r)
        print(
            f"N={n}: full rebuild {r['full']:.1f} s (graph {r['graph']}); +1 note reindex"
            f" {r['inc']:.3f} s; no-change reindex {r['noop']:.3f} s; "
            + "; ".join(f"{m} hit@1 {r[m]['hit1']:.2f} hit@5 {r[m]['hit5']:.2f}" for m in modes),
            flush=True,
        )
    report(rows, modes, len(queries))


if __name__ == "__main__":
    main()
