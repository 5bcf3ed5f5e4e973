"""The benchmark baseline ``bench/original_signals.py`` still behaves like the original.

``bench/bench_prepare.py`` and ``bench/bench_cost_model.py`` report our detector and slicer as
ratios against this baseline; those figures are only honest while the baseline reproduces
the original's documented rules (SPEC-drain §1.5, §3.2), including its faults.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reflect_jobs.cascade import Signal

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from original_signals import detect_signals_original, slice_dialogue_original  # noqa: E402

LABELLED = Path(__file__).parent / "data" / "signals_labelled.jsonl"


def sig(line: int) -> Signal:
    return Signal(line, "HIGH", "correction", "Unknown", f"line{line}", "user")


def test_original_rules_are_faithful() -> None:
    sigs = detect_signals_original(
        "Always use tabs\nalways use tabs\nThe weather is nice\nhello there\nseems like rain"
    )
    # duplicate (after prefix strip + lowercase) dropped; "hello there" and the bare
    # observation have no category, so they are not signals; "nice" is positive feedback.
    assert [(s.line_number, s.text, s.level) for s in sigs] == [
        (1, "Use tabs", "HIGH"),
        (3, "The weather is nice", "MEDIUM"),
    ]


def test_original_categories_are_over_broad() -> None:
    # "let" is a Code Style keyword in the original, so a harmless line is a signal.
    assert detect_signals_original("let me check the config file")[0].category == "Code Style"


def test_original_flags_most_real_agent_lines() -> None:
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]
    real = [r for r in rows if r["source"].startswith("real:")]
    flagged = sum(1 for r in real if detect_signals_original(r["text"])) / len(real)
    assert flagged > 0.5


def test_original_slice_overshoots_and_loses_the_tail() -> None:
    lines = ["never use var " + "z" * 100_000] + [f"l{i}" for i in range(10)] + ["late: never!"]
    original = slice_dialogue_original("\n".join(lines), [sig(1), sig(12)], max_chars=60_000)
    assert len(original) > 100_000 and "late: never!" not in original
