"""Why per-prompt recall missed or mis-told, situation by situation, on the DEV split only.

Run (on a KB ``bench_recall_eval.py --reuse PREFIX`` built)::

    HF_HUB_OFFLINE=1 PYTHONPATH=. .venv/bin/python bench/recall_eval_why.py --kb /tmp/rt/kb2000

For every dev situation whose prompt was told nothing it needed, or something it did not
need, it prints the prompt's terms, each expected learning — told, passed the relevance floor
but ranked out (its rank and score against the best), or below the floor — and what was told
instead. The test split is refused: tune on dev, report test.
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
    args = ap.parse_args()
    ds = load()
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


if __name__ == "__main__":
    main()
