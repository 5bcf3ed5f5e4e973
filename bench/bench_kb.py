"""KB index benchmarks: reindex after +1 note, full rebuild, search latency, hit@k.

Run: .venv/bin/python bench/bench_kb.py [--sizes 100,1000,5000] [--no-vectors]
For each size N it generates N notes with sidecars (30 of them are the targets of the
labelled queries in bench/data/retrieval_queries.jsonl, the rest filler), builds the index
from scratch (full rebuild), adds one note and reindexes (incremental), then measures warm
search latency (median of 20 queries per mode) and hit@1 / hit@5 for lexical, vector
(naive) and hybrid search. Figures are wall-clock on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reflect_jobs import kb  # noqa: E402
from reflect_jobs.index import maintenance  # noqa: E402
from reflect_jobs.index.search import search  # noqa: E402

TOOLS = [
    "pytest",
    "docker",
    "redis",
    "postgres",
    "sqlite",
    "nginx",
    "kafka",
    "terraform",
    "helm",
    "pnpm",
    "cargo",
    "gradle",
    "celery",
    "airflow",
    "spark",
]
VERBS = [
    "configure",
    "pin",
    "cache",
    "restart",
    "rotate",
    "vendor",
    "profile",
    "shard",
    "retry",
    "index",
]
THINGS = [
    "the build matrix",
    "the cron schedule",
    "the log format",
    "the feature flags",
    "the health check",
    "the TLS certs",
    "the worker pool",
    "the env file",
]


def filler(i: int, rng: random.Random) -> dict:
    tool, verb, thing = rng.choice(TOOLS), rng.choice(VERBS), rng.choice(THINGS)
    return {
        "title": f"{verb.capitalize()} {thing} for {tool} service {i}",
        "category": "Tools",
        "key_insight": f"When you {verb} {thing} for {tool}, do it in the deploy step {i}",
        "problem": f"{tool} {thing} was inconsistent across hosts (case {i})",
        "fix": f"{verb} {thing} centrally",
        "rule": f"always {verb} {thing} via the {tool} module {i}",
        "entities": [tool],
        "tags": [tool, verb],
    }


def target(t: dict) -> dict:
    return {
        "title": t["title"],
        "category": "Tools",
        "key_insight": t["problem"],
        "problem": t["problem"],
        "fix": t["title"],
        "rule": t["title"],
        "entities": [],
        "tags": [],
    }


def build_kb(path: Path, n: int, targets: list[dict]) -> list[str]:
    rng = random.Random(n)
    now = "2026-11-30T00:00:00Z"
    ids = []
    for t in targets:
        ids.append(
            kb.write_learning(
                path, target(t), created=now, updated=now, source_path="bench", session_id="bench"
            ).id
        )
    for i in range(n - len(targets)):
        kb.write_learning(
            path, filler(i, rng), created=now, updated=now, source_path="bench", session_id="bench"
        )
    return ids


def timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--no-vectors", action="store_true")
    args = ap.parse_args()
    vectors = not args.no_vectors
    targets = [
        json.loads(x)
        for x in (ROOT / "bench" / "data" / "retrieval_queries.jsonl").read_text().splitlines()
    ]
    print(f"KB index bench (vectors={'on' if vectors else 'off'}); {len(targets)} labelled queries")
    for n in (int(x) for x in args.sizes.split(",")):
        print("\n".join(bench_size(n, targets, vectors)), flush=True)


def bench_size(n: int, targets: list[dict], vectors: bool) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="rjkb"))
    try:
        ids, gen = timed(lambda: build_kb(tmp, n, targets))
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            stats, full = timed(lambda: maintenance.reindex(tmp, force=True, vectors=vectors))
            now = "2026-11-30T01:00:00Z"
            extra = filler(10**6, random.Random(1))
            kb.write_learning(
                tmp, extra, created=now, updated=now, source_path="bench", session_id="bench"
            )
            inc_stats, inc = timed(lambda: maintenance.reindex(tmp, vectors=vectors))
            noop_stats, noop = timed(lambda: maintenance.reindex(tmp, vectors=vectors))
            assert inc_stats.inserted == 1 and noop_stats.inserted == 0, (inc_stats, noop_stats)
            modes = ["lexical"] + (["naive", "hybrid"] if vectors else [])
            search(tmp, "warm up", mode=modes[-1], k=5, vectors=vectors)
            lines = [
                f"N={n}: generate {gen:.1f}s; full rebuild {full:.2f}s ({stats.graph}); "
                f"+1 note reindex {inc:.3f}s; no-change reindex {noop:.3f}s"
            ]
            for mode in modes:
                lines.append(quality_line(tmp, mode, targets, ids))
        return lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def quality_line(kb_path: Path, mode: str, targets: list[dict], ids: list[str]) -> str:
    lat = []
    h1 = h5 = 0
    for t, doc_id in zip(targets, ids, strict=True):
        t0 = time.perf_counter()
        res = search(kb_path, t["query"], mode=mode, k=5, vectors=mode != "lexical")
        lat.append((time.perf_counter() - t0) * 1000)
        got = [h["id"] for h in res.hits]
        h1 += got[:1] == [doc_id]
        h5 += doc_id in got
    p95 = sorted(lat)[int(len(lat) * 0.95) - 1]
    return (
        f"    {mode:8s} search median {statistics.median(lat):6.1f} ms  p95 {p95:6.1f} ms"
        f"  hit@1 {h1 / len(targets):.2f}  hit@5 {h5 / len(targets):.2f}"
    )


if __name__ == "__main__":
    main()
