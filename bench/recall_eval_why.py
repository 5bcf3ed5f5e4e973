"""Why per-prompt recall missed or mis-told, situation by situation, on the DEV split only.

Run (on a KB ``bench_recall_eval.py --reuse PREFIX`` built)::

    HF_HUB_OFFLINE=1 PYTHONPATH=. .venv/bin/python bench/recall_eval_why.py --kb /tmp/rt/kb2000

For every dev situation whose prompt was told nothing it needed, or something it did not
need, it prints the prompt's terms, each expected learning — told, passed the relevance floor
but ranked out (its rank and score against the best), or below the floor — and what was told
instead. With ``--search`` it explains search instead: for every dev query (``--repo`` and
unscoped, lexical and hybrid) whose top 5 miss every expected learning, where each expected one
ranked among the lexical candidates (its coverage against the floor) and what outranked it
(coverage, score, whose learning); for every query that needs nothing but was answered, what
passed the floor and with what coverage. The test split is refused: tune on dev, report test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import recall_eval_kb as kbuild  # noqa: E402
from recall_eval_data import load  # noqa: E402

from reflect_jobs.recall import hook_inputs, relevance, store  # noqa: E402
from reflect_jobs.repo import repo_for  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=Path, required=True, help="a --reuse directory (with ids.json)")
    ap.add_argument("--split", default="dev", choices=["dev"], help="dev only")
    ap.add_argument("--search", action="store_true", help="explain search, not per-prompt recall")
    ap.add_argument("--modes", default="lexical,hybrid", help="search modes (with --search)")
    args = ap.parse_args()
    ds = load()
    if args.search:
        search_why(args.kb, ds, args.split, args.modes.split(","))
        return
    old = kbuild.apply_env(kbuild.env_for(args.kb, vectors=True))
    try:
        ids = json.loads((args.kb / "ids.json").read_text())
        bench_of = {note: bench for bench, note in ids.items()}
        dirs = {k: kbuild.fake_repo(args.kb, k, r) for k, r in ds.repos.items()}
        by = ds.by_id()
        conn = store.open_for_read(store.store_path(str(args.kb / "kb")))
        if conn is None:
            raise SystemExit(f"no context store under {args.kb}")
        hits = good = told_n = rel = 0
        for s in (x for x in ds.situations if x["split"] == args.split):
            ref = repo_for(str(dirs[s["repo"]]))
            prof = hook_inputs.repo_profile_terms(ref)
            ranked = relevance.rank_for_prompt(
                conn,
                s["prompt"],
                repo_key=ref.key if ref else None,
                profile_terms=prof,
                limit=50,
                relative=0.0,
            )
            order = [bench_of.get(str(r["id"]), str(r["id"])) for r in ranked]
            told = relevance.rank_for_prompt(
                conn, s["prompt"], repo_key=ref.key if ref else None, profile_terms=prof
            )
            told_ids = [bench_of.get(str(r["id"]), str(r["id"])) for r in told]
            exp = s["expected"]
            wrong = [t for t in told_ids if t not in exp]
            if exp:
                rel += 1
                hits += any(e in told_ids for e in exp)
                good += len(told_ids) - len(wrong)
                told_n += len(told_ids)
            if not wrong and (not exp or any(e in told_ids for e in exp)):
                continue
            print(
                f"\n{s['id']} [{s['kind']}] {s['prompt']!r}\n   terms {relevance.terms(s['prompt'])}"
            )
            for e in exp:
                if e in told_ids:
                    state = "TOLD"
                elif e in order:
                    i = order.index(e)
                    state = (
                        f"passed the floor, rank {i + 1}, {ranked[i]['relevance']:.2f}"
                        f" vs best {ranked[0]['relevance']:.2f}"
                    )
                else:
                    state = "below the floor (or not a candidate: another stack)"
                print(f"   want {e}: {state} — {by[e].title}")
            for t in wrong:
                print(f"   told instead {t}: {by[t].title if t in by else ''}")
        print(
            f"\n{args.split}: hit {hits / max(rel, 1):.3f}, precision {good / max(told_n, 1):.3f}"
            " (lexical: the worker's model is not asked)"
        )
    finally:
        kbuild.restore_env(old)


def search_why(root: Path, ds, split: str, modes: list[str]) -> None:
    """Print each dev search miss and each irrelevant query answered (see the module doc)."""
    from reflect_jobs.index import search as srch
    from reflect_jobs.index.lexical import LexicalIndex

    old = kbuild.apply_env(kbuild.env_for(root, vectors=True))
    try:
        kb_root = root / "kb"
        ids = json.loads((root / "ids.json").read_text())
        bench_of = {note: bench for bench, note in ids.items()}
        dirs = {k: kbuild.fake_repo(root, k, r) for k, r in ds.repos.items()}
        by = ds.by_id()
        lex = LexicalIndex(kb_root / "index" / "lexical.db")
        floor = srch.FUSION.sized(lex.size()).floor_coverage
        print(f"{lex.size()} notes, coverage floor {floor:.3f}")

        def name(note: str) -> str:
            b = bench_of.get(note, note)
            x = by.get(b)
            return f"{b} [{(x.repo or 'global') if x else '?'}] {x.title if x else ''}"

        tally: dict[str, list[int]] = {}
        for s in (x for x in ds.situations if x["split"] == split):
            key = repo_for(str(dirs[s["repo"]])).key
            for scope_name, repo_key in (("repo", key), ("all", None)):
                scope = srch.scope_filter(kb_root, repo_key, False)
                exclude = scope.exclude if scope else frozenset()
                cands = lex.scored(s["query"], srch.CANDIDATES, exclude=exclude, coverage=True)
                cov = {h.doc_id: h for h in cands}
                order = [h.doc_id for h in cands]
                for mode in modes:
                    res = srch.search(
                        kb_root, s["query"], mode=mode, k=5, vectors=True, repo_key=repo_key
                    )
                    got = [str(h["id"]) for h in res.hits]
                    got_b = [bench_of.get(g, g) for g in got]
                    exp = s["expected"]
                    bad = bool(got) if not exp else not any(e in got_b for e in exp)
                    t = tally.setdefault(f"{mode}/{scope_name}", [0, 0])
                    t[0] += bad
                    t[1] += 1
                    if not bad:
                        continue
                    print(f"\n{s['id']} {mode}/{scope_name} [{s['kind']}] {s['query']!r}")
                    for e in exp:
                        note = ids.get(e, "")
                        if note in cov:
                            h = cov[note]
                            print(
                                f"   want {name(note)}: lexical rank {order.index(note) + 1},"
                                f" coverage {h.coverage:.2f}, bm25 {h.score:.2f}"
                            )
                        else:
                            print(f"   want {name(note)}: not among the lexical candidates")
                    for g, h in zip(got, res.hits, strict=True):
                        c = cov.get(g)
                        extra = f"coverage {c.coverage:.2f}, bm25 {c.score:.2f}" if c else "vector"
                        print(f"   got  {name(g)}: {extra}, score {h['score']:.3f}")
        print("\n" + ", ".join(f"{k} wrong {v[0]}/{v[1]}" for k, v in tally.items()))
        lex.close()
    finally:
        kbuild.restore_env(old)


if __name__ == "__main__":
    main()
