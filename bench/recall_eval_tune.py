"""Tune search's fusion and relevance floor on the recall benchmark's DEV split (never test).

Run::

    HF_HUB_OFFLINE=1 .venv/bin/python bench/recall_eval_tune.py --scale 200 --kb /tmp/tune200

Builds (or reuses, with ``--kb``) the benchmark's KB exactly as ``bench_recall_eval.py`` does,
records for every dev situation and scope (``--repo`` and unscoped) the lexical candidates
(with coverage, scoped before the top are taken) and the naive vector cosines, then scores a
grid of :class:`reflect_jobs.index.search.Fusion` settings with the product's own pure
:func:`~reflect_jobs.index.search.fuse` — the same function search runs — and prints the best
settings by an objective that counts hit@1, hit@5 and empty-when-irrelevant for lexical and
hybrid alike. The chosen settings go into ``search.FUSION`` by hand; the test split is then
measured once with ``bench_recall_eval.py --split test``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import recall_eval_kb as kbuild  # noqa: E402
from recall_eval_data import load  # noqa: E402

from reflect_jobs.index import lexical as lexmod  # noqa: E402
from reflect_jobs.index.lexical import LexicalHit, LexicalIndex  # noqa: E402
from reflect_jobs.index.search import Fusion, fuse, scope_filter  # noqa: E402
from reflect_jobs.index.semantic import graph_index  # noqa: E402
from reflect_jobs.repo import repo_for  # noqa: E402

_VECTORS: dict[tuple[str, int], list] = {}


def collect(kb_root: Path, dirs: dict, situations: list[dict], weights: tuple) -> list[dict]:
    """Per situation and scope: lexical hits (id, score, coverage) and vector cosines.

    The vector ranking does not depend on the lexical weights: it is memoised across them.
    """
    lexmod.WEIGHTS = weights
    lex = LexicalIndex(kb_root / "index" / "lexical.db")
    graph = graph_index(kb_root, vectors=True)
    out = []
    for s in situations:
        key = repo_for(str(dirs[s["repo"]])).key
        for scope_name, repo_key in (("repo", key), ("all", None)):
            scope = scope_filter(kb_root, repo_key, False)
            exclude = scope.exclude if scope else frozenset()
            own = scope.own if scope else frozenset()
            hits = lex.scored(s["query"], 50, exclude=exclude, coverage=True)
            memo = (s["query"], len(exclude))
            if memo not in _VECTORS:
                _VECTORS[memo] = graph.query(s["query"], mode="naive", k=50 + len(exclude))
            vec = [(d, c) for d, c in _VECTORS[memo] if d not in exclude][:50]
            out.append(
                {
                    "id": s["id"],
                    "scope": scope_name,
                    "expected": s["expected"],
                    "lex": [(h.doc_id, h.score, h.coverage, h.lone) for h in hits],
                    "vec": vec,
                    "own": sorted(own),
                    "docs": lex.size(),
                }
            )
    lex.close()
    return out


def evaluate(records: list[dict], fusion: Fusion, use_vector: bool, kinds: dict) -> dict:
    """hit@1/@5 per expected kind (repo/global) and scope, and empty-when-irrelevant."""
    res: dict[str, list[float]] = {}
    for r in records:
        hits = [LexicalHit(*h) for h in r["lex"]]
        sized = fusion.sized(r.get("docs", fusion.floor_docs))  # the floor search applies
        ranked = [d for d, _ in fuse(hits, r["vec"], set(r["own"]), sized, use_vector=use_vector)][
            :5
        ]
        if not r["expected"]:
            res.setdefault(f"{r['scope']}/empty", []).append(float(not ranked))
            continue
        for kind in ("repo", "global"):
            want = [kinds[e] for e in r["expected"] if kinds[e][1] == kind]
            if not want:
                continue
            ids = {w[0] for w in want}
            for k in (1, 5):
                res.setdefault(f"{r['scope']}/{kind}@{k}", []).append(
                    float(any(d in ids for d in ranked[:k]))
                )
    return {k: round(statistics.mean(v), 3) for k, v in sorted(res.items())}


def objective(m: dict) -> float:
    keys = [k for k in m if "@" in k]
    hit = statistics.mean(m[k] for k in keys)
    empty = statistics.mean(m[k] for k in m if k.endswith("empty"))
    return hit + 0.5 * empty


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=["200", "2000"], default="200")
    ap.add_argument("--kb", type=Path, required=True, help="build here once, reuse after")
    ap.add_argument("--split", default="dev", choices=["dev"], help="dev only: never tune on test")
    ap.add_argument(
        "--weights", default="4,3,1,6", help="lexical column weights to try; ';' separates"
    )
    ap.add_argument("--dump", type=Path, help="write the candidate records here (per weights)")
    ap.add_argument("--records", type=Path, help="tune on records --dump wrote (no KB, no model)")
    args = ap.parse_args()
    if args.records:
        data = json.loads(args.records.read_text())
        tune(data["records"], {k: tuple(v) for k, v in data["kinds"].items()})
        return
    ds = load()
    situations = [s for s in ds.situations if s["split"] == args.split]
    root = args.kb
    root.mkdir(parents=True, exist_ok=True)
    old = kbuild.apply_env(kbuild.env_for(root, vectors=True))
    try:
        marker = root / "ids.json"
        if marker.exists():
            ids = json.loads(marker.read_text())
            kbuild.reindex(root / "kb", vectors=True)  # brings a changed lexical layout in line
        else:
            ids, _, _ = kbuild.build(ds, args.scale, root, vectors=True)
            marker.write_text(json.dumps(ids))
        dirs = {key: kbuild.fake_repo(root, key, repo) for key, repo in ds.repos.items()}
        note_of = ids
        kinds = {b: (note_of[b], ds.by_id()[b].scope) for b in note_of}
        for wtext in args.weights.split(";"):
            weights = tuple(float(x) for x in wtext.split(","))
            recs = collect(root / "kb", dirs, situations, weights)
            recs = [{**r, "expected": [e for e in r["expected"] if e in kinds]} for r in recs]
            if args.dump:
                name = args.dump.with_name(f"{args.dump.stem}-{wtext.replace(',', '_')}.json")
                name.write_text(json.dumps({"kinds": kinds, "records": recs}))
            print(f"\n== weights {weights}: {len(recs)} records")
            tune(recs, kinds)
    finally:
        kbuild.restore_env(old)


def tune(recs: list[dict], kinds: dict) -> None:
    base = Fusion(coverage_weight=0.0, own_boost=1.0, floor_coverage=0.0, floor_cosine=2.0)
    print("plain bm25 (no floor, no boost):", evaluate(recs, base, False, kinds))
    grid_lex = []
    for cw, boost, floor in itertools.product(
        (0.0, 0.3, 0.5, 0.7, 1.0), (1.0, 1.1, 1.25, 1.5), (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)
    ):
        f = Fusion(coverage_weight=cw, own_boost=boost, floor_coverage=floor, floor_cosine=2.0)
        m = evaluate(recs, f, False, kinds)
        grid_lex.append((objective(m), f, m))
    grid_lex.sort(key=lambda x: -x[0])
    for obj, f, m in grid_lex[:5]:
        print(f"lexical {obj:.3f} {f}\n    {m}")
    best_lex, lex_m = grid_lex[0][1], grid_lex[0][2]
    grid = []
    for vw, cz, fc in itertools.product(
        (0.0, 0.2, 0.35, 0.5, 0.75, 1.0), (0.1, 0.2, 0.3), (0.45, 0.5, 0.55, 0.6, 0.7, 2.0)
    ):
        f = Fusion(
            coverage_weight=best_lex.coverage_weight,
            vector_weight=vw,
            cosine_zero=cz,
            own_boost=best_lex.own_boost,
            floor_coverage=best_lex.floor_coverage,
            floor_cosine=fc,
        )
        m = evaluate(recs, f, True, kinds)
        # Hybrid must never be worse than lexical: only settings at or above it everywhere.
        if all(m[key] >= lex_m[key] for key in lex_m):
            grid.append((objective(m), f, m))
    grid.sort(key=lambda x: -x[0])
    print(f"hybrid settings at or above lexical on every figure: {len(grid)}")
    for obj, f, m in grid[:5]:
        print(f"hybrid {obj:.3f} {f}\n    {m}")


if __name__ == "__main__":
    main()
