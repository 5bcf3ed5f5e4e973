"""Tune per-prompt recall's relevance floor and the worker's cosine on the DEV split (never test).

Run (on a KB ``bench_recall_eval.py --reuse PREFIX`` built)::

    HF_HUB_OFFLINE=1 PYTHONPATH=. .venv/bin/python bench/recall_eval_prompt_tune.py \
        --kb /tmp/heldout-kb2000

For every dev situation it records what the UserPromptSubmit hook has in hand — the prompt,
the repository's key and profile, and the cosines the running worker's model answers for the
prompt (``index/semantic.py:similar``, the ``recall_similar`` request's ``K`` nearest) — then
scores a grid of :mod:`reflect_jobs.recall.relevance` settings with the product's own
:func:`~reflect_jobs.recall.relevance.rank_for_prompt` (the store's reads are cached, so a
setting costs the scoring only). It prints, for the lexical ranking (no worker) and for the
ranking with the worker's cosines, the current settings' figures and the best settings by
the objective ``min(hit, precision)`` among those silent on at least ``--silence`` of the
prompts that need nothing (the issue's targets: hit and precision ≥ 0.70, silence ≥ 0.80).
Chosen settings go into ``relevance.py`` by hand; the test and held-out splits are then
measured once with ``bench_recall_eval.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import recall_eval_kb as kbuild  # noqa: E402
from recall_eval_data import load  # noqa: E402

from reflect_jobs.index import semantic as sem  # noqa: E402
from reflect_jobs.recall import hook_inputs, relevance, store, warm_rank  # noqa: E402
from reflect_jobs.repo import repo_for  # noqa: E402

LEXICAL_GRID = {
    "FLOOR": (0.8, 0.9, 1.0, 1.1, 1.2),
    "RELATIVE": (0.8, 0.9, 1.0),
    "TITLE_SHARE": (0.5, 1.0, 2.0),
    # relevance.FIELD_WEIGHT["applies_when"]: what a match in a learning's phrases weighs
    "WHEN_WEIGHT": (0.4, 0.6, 0.8, 1.0),
}
SEMANTIC_GRID = {
    "SEM_WEIGHT": (0.0, 1.0, 2.5, 4.0, 6.0, 8.0, 12.0),
    "SEM_BASE": (0.2, 0.3, 0.35, 0.4, 0.45, 0.5),
    "SEM_ALONE": (0.5, 0.6, 0.7, 0.8, 1.1),
}


@contextmanager
def settings(values: dict[str, float]) -> Iterator[None]:
    """``relevance``'s module settings set to ``values`` for the block, restored after
    (``WHEN_WEIGHT`` is ``FIELD_WEIGHT["applies_when"]``)."""
    values = dict(values)
    weights = dict(relevance.FIELD_WEIGHT)
    if "WHEN_WEIGHT" in values:
        relevance.FIELD_WEIGHT["applies_when"] = values.pop("WHEN_WEIGHT")
    old = {k: getattr(relevance, k) for k in values}
    for k, v in values.items():
        setattr(relevance, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(relevance, k, v)
        relevance.FIELD_WEIGHT.clear()
        relevance.FIELD_WEIGHT.update(weights)


def record(kb_dir: Path) -> tuple[list[dict], object]:
    """Every dev situation with what the hook has in hand, and an open store connection."""
    ds = load()
    ids = json.loads((kb_dir / "ids.json").read_text())
    dirs = {k: kbuild.fake_repo(kb_dir, k, r) for k, r in ds.repos.items()}
    kb_root = kb_dir / "kb"
    conn = store.open_for_read(store.store_path(str(kb_root)))
    if conn is None:
        raise SystemExit(f"no context store under {kb_dir}")
    rows = []
    for s in (x for x in ds.situations if x["split"] == "dev"):
        ref = repo_for(str(dirs[s["repo"]]))
        text = relevance.prompt_text(s["prompt"])
        cos = dict(sem.similar(kb_root, text[: warm_rank.MAX_TEXT], k=warm_rank.K, vectors=True))
        rows.append(
            {
                "prompt": s["prompt"],
                "repo_key": ref.key if ref else None,
                "profile": hook_inputs.repo_profile_terms(ref),
                "expected": {ids[e] for e in s["expected"] if e in ids},
                "cos": cos,
            }
        )
    return rows, conn


def evaluate(conn: object, rows: list[dict], *, semantic: bool) -> dict[str, float]:
    """Hit, precision (of the told lines, where something was needed) and silence."""
    rel = [r for r in rows if r["expected"]]
    none = [r for r in rows if not r["expected"]]
    hits = good = told_n = silent = 0
    for r in rows:
        told = relevance.rank_for_prompt(
            conn,  # type: ignore[arg-type]
            r["prompt"],
            repo_key=r["repo_key"],
            profile_terms=r["profile"],
            semantic=r["cos"] if semantic else None,
        )
        got = [str(t["id"]) for t in told]
        if r["expected"]:
            hits += any(g in r["expected"] for g in got)
            good += sum(g in r["expected"] for g in got)
            told_n += len(got)
        else:
            silent += not got
    return {
        "hit": hits / max(len(rel), 1),
        "precision": good / told_n if told_n else 0.0,
        "silence": silent / max(len(none), 1),
    }


def grid(space: dict[str, tuple[float, ...]]) -> Iterator[dict[str, float]]:
    keys = list(space)
    for combo in itertools.product(*(space[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def best(conn: object, rows: list[dict], space: dict, *, semantic: bool, silence: float) -> list:
    out = []
    for values in grid(space):
        with settings(values):
            m = evaluate(conn, rows, semantic=semantic)
        if m["silence"] >= silence:
            out.append((min(m["hit"], m["precision"]), m["hit"] + m["precision"], values, m))
    out.sort(key=lambda x: (-x[0], -x[1]))
    return out[:8]


def show(label: str, m: dict[str, float]) -> None:
    print(
        f"  {label:<58} hit {m['hit']:.3f}  precision {m['precision']:.3f}  "
        f"silence {m['silence']:.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=Path, required=True, help="a --reuse directory (with ids.json)")
    ap.add_argument("--silence", type=float, default=0.9, help="least silence a setting keeps")
    args = ap.parse_args()
    old = kbuild.apply_env(kbuild.env_for(args.kb, vectors=True))
    try:
        rows, conn = record(args.kb)
        # The store's reads depend on the prompt and the candidate rows only: cache them,
        # so each setting costs the scoring.
        relevance.idf = _cached_idf(relevance.idf)  # type: ignore[assignment]
        store.rows_by_rid = _cached_rows(store.rows_by_rid)  # type: ignore[assignment]
        n_rel = sum(1 for r in rows if r["expected"])
        print(f"dev: {len(rows)} situations ({n_rel} need a learning)")
        show("current, lexical", evaluate(conn, rows, semantic=False))
        show("current, with the worker's cosines", evaluate(conn, rows, semantic=True))
        print(f"best lexical settings (min(hit, precision), silence ≥ {args.silence:.2f}):")
        for _, _, values, m in best(conn, rows, LEXICAL_GRID, semantic=False, silence=args.silence):
            show(str(values), m)
        print("best cosine settings with the current lexical ones:")
        for _, _, values, m in best(conn, rows, SEMANTIC_GRID, semantic=True, silence=args.silence):
            show(str(values), m)
    finally:
        kbuild.restore_env(old)


def _cached_idf(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``relevance.idf`` memoised by the prompt's terms (a pure read of a store not written)."""
    memo: dict[tuple[str, ...], Any] = {}

    def wrapper(conn: object, term_list: list[str]) -> Any:
        key = tuple(term_list)
        if key not in memo:
            memo[key] = fn(conn, term_list)
        return memo[key]

    return wrapper


def _cached_rows(fn: Callable[..., Any]) -> Callable[..., list[dict]]:
    """``store.rows_by_rid`` memoised by the rows asked for (copies: the ranking adds keys)."""
    memo: dict[tuple[int, ...], list[dict]] = {}

    def wrapper(conn: object, rids: list[int]) -> list[dict]:
        key = tuple(sorted(rids))
        if key not in memo:
            memo[key] = fn(conn, list(key))
        return [dict(r) for r in memo[key]]

    return wrapper


if __name__ == "__main__":
    main()
