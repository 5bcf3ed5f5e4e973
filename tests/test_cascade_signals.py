"""Signal detection measured on a labelled set (§1.5, B16).

The comparison with the original's rules is a benchmark (``bench/bench_prepare.py``); the
baseline itself is checked in ``test_bench_original_signals.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from reflect_jobs.cascade import (
    Signal,
    detect_signals,
    signal_set_hash,
)
from reflect_jobs.transcripts import Turn

LABELLED = Path(__file__).parent / "data" / "signals_labelled.jsonl"


def load_labelled() -> list[dict]:
    return [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]


def ours(row: dict) -> bool:
    return bool(detect_signals([Turn(0, row["role"], row["text"])]))


def scores(rows: list[dict], predict) -> dict[str, float]:
    tp = sum(1 for r in rows if r["signal"] and predict(r))
    fp = sum(1 for r in rows if not r["signal"] and predict(r))
    fn = sum(1 for r in rows if r["signal"] and not predict(r))
    human = [r for r in rows if r["signal"] and r["role"] == "user"]
    return {
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "human_recall": sum(1 for r in human if predict(r)) / len(human),
        "flagged": (tp + fp) / len(rows),
    }


def test_labelled_set_shape() -> None:
    rows = load_labelled()
    assert len(rows) >= 150
    assert all(set(r) == {"text", "role", "signal", "source"} for r in rows)
    assert all(r["role"] in ("user", "assistant") for r in rows)
    assert sum(r["source"].startswith("real:") for r in rows) >= 50
    assert sum(r["signal"] and r["role"] == "user" for r in rows) >= 50


def test_ours_precise_with_high_human_recall() -> None:
    rows = load_labelled()
    mine = scores(rows, ours)
    assert mine["human_recall"] >= 0.95
    assert mine["precision"] >= 0.9
    # Real agent transcripts (tool chatter, stop-hook feedback): ours flags nearly no line.
    real = [r for r in rows if r["source"].startswith("real:")]
    assert scores(real, ours)["flagged"] < 0.05


def test_let_me_check_is_not_a_signal() -> None:
    assert not detect_signals([Turn(0, "assistant", "let me check the config file")])
    assert not detect_signals([Turn(0, "user", "let me check the config file")])


def test_assistant_lines_only_count_for_strong_kinds() -> None:
    turns = [
        Turn(0, "assistant", "I must never skip the tests. That's wrong, let me redo it."),
        Turn(1, "assistant", "The root cause was a missing index on user_id."),
    ]
    [sig] = detect_signals(turns)
    assert (sig.line_number, sig.kind, sig.level, sig.role) == (
        2,
        "root_cause",
        "HIGH",
        "assistant",
    )


def test_line_numbers_index_the_dialogue_lines() -> None:
    turns = [
        Turn(0, "user", "Run the tests please"),
        Turn(1, "assistant", "Running them.\nDone."),
        Turn(2, "user", "Thanks.\nNo, never use a bare except."),
    ]
    [sig] = detect_signals(turns)
    assert sig.line_number == 5
    assert sig.text == "No, never use a bare except."
    assert sig.level == "HIGH" and sig.kind == "correction" and sig.role == "user"


def test_levels_kinds_and_categories() -> None:
    cases = {
        "Never hardcode the password in source files.": ("HIGH", "correction", "Security"),
        "Perfect, that's exactly it.": ("MEDIUM", "approval", "Unknown"),
        "The rule is: every migration needs a downgrade.": ("HIGH", "explicit_rule", None),
        "Don't use var, use const.": ("HIGH", "correction", "Code Style"),
        "Always squash before you merge the branch.": ("HIGH", "requirement", "Process"),
    }
    for text, (level, kind, category) in cases.items():
        [sig] = detect_signals([Turn(0, "user", text)])
        assert (sig.level, sig.kind) == (level, kind), text
        if category:
            assert sig.category == category, text


def test_slash_reflect_human_line_is_a_signal() -> None:
    text = "/reflect later, but first: never use var here, the root cause was a missing index."
    assert detect_signals([Turn(0, "user", text)])


def test_signal_set_hash_semantics() -> None:
    a = Signal(1, "HIGH", "correction", "Unknown", "Never use var", "user")
    b = Signal(9, "HIGH", "correction", "Unknown", "  never use VAR ", "user")
    c = Signal(3, "MEDIUM", "approval", "Unknown", "Perfect", "user")
    h = signal_set_hash([a, c])
    assert len(h) == 16 and int(h, 16) >= 0
    assert h == signal_set_hash([c, a]) == signal_set_hash([c, b, a])
    assert h != signal_set_hash([a])
    payload = json.dumps({"signals": sorted({"never use var", "perfect"})}, sort_keys=True)
    assert h == hashlib.sha256(payload.encode()).hexdigest()[:16]
