"""Evidence or nothing, measured: precision and recall of the quote check (ARCHITECTURE §6).

Each case of ``bench/data/evidence_cases.json`` is a session and the CREATEs a model
answered for it, written by hand: evidenced quotes (verbatim, or echoed with the case,
whitespace, quote marks, dashes, markdown marks or Unicode forms changed, as models do),
hallucinated ones (words the session never showed, quotes of the slice header or of the
revision block), paraphrases, elided quotes and missing or trivial evidence. Each session
goes through the real ``cascade.prepare`` (its slice and origin codes), each answer through
the real ``plan_actions`` with the sent slice — exactly what the write stage runs.

Printed: precision of what is kept (kept and evidenced / kept; target 1.0), recall of the
evidenced (kept / evidenced; target ≥ 0.95), how each other label fared, whether the origin
of every kept quote is the one written down, and the cost per answer.

Run: ``python bench/bench_evidence.py [--json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reflect_jobs.cascade import prepare  # noqa: E402
from reflect_jobs.cascade.model import EmptyLedger, RelatedCandidate  # noqa: E402
from reflect_jobs.cascade.origins import encode  # noqa: E402
from reflect_jobs.transcripts.model import Transcript, Turn  # noqa: E402
from reflect_jobs.writer.actions import plan_actions  # noqa: E402
from reflect_jobs.writer.evidence import sent_slice  # noqa: E402

DATA = ROOT / "bench" / "data" / "evidence_cases.json"


class _Related(EmptyLedger):
    """A ledger that offers the case's related learnings to the revision block."""

    def __init__(self, related: list[dict]) -> None:
        self._related = [
            RelatedCandidate(r["id"], r["title"], "Tools", "active", 1, "2026-01-01T00:00:00")
            for r in related
        ]

    def related_candidates(self, limit: int = 1000) -> list[RelatedCandidate]:
        return self._related[:limit]


def run() -> dict:
    cases = json.loads(DATA.read_text(encoding="utf-8"))["cases"]
    fates: Counter[tuple[str, bool]] = Counter()
    origin_ok = origin_total = 0
    wrong_origins: list[str] = []
    spent = 0.0
    answers = 0
    for case in cases:
        turns = [Turn(i, role, text) for i, (role, text) in enumerate(case["turns"])]
        prepared = prepare(
            Transcript("claude", turns=turns),
            _Related(case.get("related", [])),
            source_name=f"{case['name']}.jsonl",
        )
        assert prepared.action == "reflect", (case["name"], prepared.reason)
        actions = [
            {
                "action": "CREATE",
                "learning": {"title": c["title"], "rule": c["title"], "evidence": c["evidence"]},
            }
            for c in case["creates"]
        ]
        started = time.perf_counter()
        sent = sent_slice(prepared.slice_text, encode(prepared.slice_origins))
        plan = plan_actions(actions, allowed_ids=set(), sent=sent)
        spent += time.perf_counter() - started
        answers += 1
        kept = {c["title"]: c for c in plan.creates}
        for c in case["creates"]:
            is_kept = c["title"] in kept
            fates[(c["label"], is_kept)] += 1
            if is_kept and c["label"] == "evidenced":
                origin_total += 1
                got = kept[c["title"]]["evidence_origin"]
                if got == c["origin"]:
                    origin_ok += 1
                else:
                    wrong_origins.append(f"{case['name']}/{c['title']}: {got} != {c['origin']}")
    evidenced = fates[("evidenced", True)] + fates[("evidenced", False)]
    kept_all = sum(n for (_, k), n in fates.items() if k)
    labels = sorted({label for label, _ in fates})
    return {
        "cases": len(cases),
        "creates": sum(fates.values()),
        "evidenced": evidenced,
        "kept": kept_all,
        "precision": fates[("evidenced", True)] / kept_all if kept_all else 1.0,
        "recall": fates[("evidenced", True)] / evidenced if evidenced else 1.0,
        "by_label": {
            label: {"kept": fates[(label, True)], "dropped": fates[(label, False)]}
            for label in labels
        },
        "origin_correct": f"{origin_ok}/{origin_total}",
        "wrong_origins": wrong_origins,
        "ms_per_answer": round(1000 * spent / max(answers, 1), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = run()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['cases']} sessions, {out['creates']} CREATEs ({out['evidenced']} evidenced)")
    for label, fate in out["by_label"].items():
        print(f"  {label:<13} kept {fate['kept']:>3}  dropped {fate['dropped']:>3}")
    print(f"precision of what is kept: {out['precision']:.3f}  (target 1.0)")
    print(f"recall of the evidenced:   {out['recall']:.3f}  (target >= 0.95)")
    print(f"evidence_origin as written down: {out['origin_correct']}")
    for line in out["wrong_origins"]:
        print(f"  wrong origin: {line}")
    print(f"check cost: {out['ms_per_answer']} ms per answer (slice index + every quote)")


if __name__ == "__main__":
    main()
