"""Per-file report on the bundled transcripts, and precision/recall on a held-out split.

For every session file under ``tests/data/transcripts`` (real ones in ``<harness>/``,
format-built ones in ``constructed/<harness>/``, the small synthetic ones at the top) this
prints: records read, turns kept (user turns), signals (and their kinds) and the $0 outcome
``prepare`` gives with an empty ledger (``reflect`` or ``skip_<reason>``).

Then it scores the detector on ``tests/data/transcripts/labels-heldout.json``: user turns
labelled correction / not correction by reading them, before the detector was run on them
(the labels' ``note`` says how). A turn is *predicted* a correction when a signal other than
an interruption/rejection falls on one of its lines. Precision/recall are printed for the
real files, third-party constructed ones, our constructed ones and all, next to the same figures on the line labels the
rules were written against (``tests/data/signals_labelled.jsonl``), so the two are read
together. Run: ``.venv/bin/python bench/report_transcripts.py``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reflect_jobs.cascade import EmptyLedger, detect_signals, prepare
from reflect_jobs.cascade.signals import FEEDBACK_KINDS, classify_line
from reflect_jobs.transcripts import Transcript, UnreadableTranscript, read_transcript

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "transcripts"
LABELS = DATA / "labels-heldout.json"
TUNED = ROOT / "tests" / "data" / "signals_labelled.jsonl"
#: Where a labelled file came from (``origin`` in the labels), and all of them together.
ORIGINS = ("real", "third-party", "constructed", "all")


@dataclass
class FileRow:
    """What the report prints for one session file."""

    name: str
    records: int = 0
    turns: int = 0
    user_turns: int = 0
    signals: Counter = field(default_factory=Counter)
    outcome: str = ""


@dataclass
class Score:
    """A confusion count for correction detection."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def add(self, predicted: bool, actual: bool) -> None:
        """Count one labelled item.

        Args:
            predicted: Whether the detector called it a correction.
            actual: Whether the label says it is one.
        """
        if predicted and actual:
            self.tp += 1
        elif predicted:
            self.fp += 1
        elif actual:
            self.fn += 1
        else:
            self.tn += 1

    def line(self, label: str) -> str:
        """One printed line: counts, precision and recall (``n/a`` when undefined).

        Args:
            label: What was scored.

        Returns:
            The formatted line.
        """
        p = f"{self.tp / (self.tp + self.fp):.3f}" if self.tp + self.fp else "n/a"
        r = f"{self.tp / (self.tp + self.fn):.3f}" if self.tp + self.fn else "n/a"
        n = self.tp + self.fp + self.fn + self.tn
        return (
            f"{label:<34} n={n:<4} tp={self.tp} fp={self.fp} fn={self.fn} precision={p} recall={r}"
        )


def session_files() -> list[Path]:
    """Every bundled session file, in a stable order.

    Returns:
        The ``*.jsonl`` files under ``tests/data/transcripts``.
    """
    return sorted(DATA.rglob("*.jsonl"))


def outcome_of(transcript: Transcript, name: str) -> str:
    """The $0 outcome of one transcript with an empty ledger.

    Args:
        transcript: The transcript as read.
        name: Its name, for the slice header.

    Returns:
        ``reflect`` or ``skip_<reason>`` (the job outcome ``pipeline/prepare.py`` records).
    """
    out = prepare(transcript, EmptyLedger(), source_name=name)
    return "reflect" if out.action == "reflect" else f"skip_{out.reason}"


def file_row(path: Path) -> tuple[FileRow, Transcript | None]:
    """Read one file and summarise it.

    Args:
        path: A session file.

    Returns:
        Its row, and the transcript (``None`` when unreadable).
    """
    row = FileRow(str(path.relative_to(DATA)))
    try:
        t = read_transcript(path)
    except UnreadableTranscript as exc:
        row.outcome = f"skip_unreadable ({exc})"
        return row, None
    row.records, row.turns = t.records, len(t.turns)
    row.user_turns = sum(1 for turn in t.turns if turn.role == "user")
    row.signals = Counter(s.kind for s in detect_signals(t.turns))
    row.outcome = outcome_of(t, path.name)
    return row, t


def predicted_user_turns(t: Transcript) -> list[tuple[str, bool]]:
    """Each kept user turn's text and whether the detector calls it a correction.

    Args:
        t: A transcript.

    Returns:
        ``(text, predicted)`` per user turn, in order.
    """
    lines_with_signal = {
        s.line_number for s in detect_signals(t.turns) if s.kind not in FEEDBACK_KINDS
    }
    out, first = [], 1
    for turn in t.turns:
        count = turn.text.count("\n") + 1
        if turn.role == "user":
            hit = any(first <= n < first + count for n in lines_with_signal)
            out.append((turn.text, hit))
        first += count
    return out


def score_heldout(transcripts: dict[str, Transcript]) -> tuple[dict[str, Score], list[str]]:
    """Score the labelled held-out turns and outcomes.

    Args:
        transcripts: Read transcripts by their path relative to the data directory.

    Returns:
        Scores per ``ORIGINS`` entry, and one line per disagreement
        (turn or outcome) for the reader to check.
    """
    labels = json.loads(LABELS.read_text(encoding="utf-8"))["files"]
    scores = {k: Score() for k in ORIGINS}
    notes = []
    for name, entry in labels.items():
        t = transcripts.get(name)
        if t is None:
            notes.append(f"MISSING {name}")
            continue
        got = outcome_of(t, name)
        if got != entry["outcome"]:
            notes.append(f"outcome {name}: labelled {entry['outcome']}, got {got}")
        turns = predicted_user_turns(t)
        for label in entry["turns"]:
            match = [p for text, p in turns if text.startswith(label["starts"])]
            if not match:
                notes.append(f"unmatched turn in {name}: {label['starts']!r}")
                continue
            for key in (entry["origin"], "all"):
                scores[key].add(match[0], label["correction"])
            if match[0] != label["correction"]:
                kind = "FP" if match[0] else "FN"
                notes.append(f"{kind} {name}: {label['starts']!r}")
    return scores, notes


def score_tuned() -> Score:
    """The line-level score on the labels the rules were written against.

    Returns:
        The confusion count of ``classify_line`` on ``signals_labelled.jsonl``.
    """
    score = Score()
    for raw in TUNED.read_text(encoding="utf-8").splitlines():
        item = json.loads(raw)
        score.add(classify_line(item["text"].strip(), item["role"]) is not None, item["signal"])
    return score


def main() -> int:
    """Print the per-file table and the scores.

    Returns:
        0.
    """
    transcripts: dict[str, Transcript] = {}
    print(f"{'file':<72} {'records':>7} {'turns':>5} {'user':>4}  {'outcome':<22} signals")
    for path in session_files():
        row, t = file_row(path)
        if t is not None:
            transcripts[row.name] = t
        kinds = ", ".join(f"{k}×{n}" for k, n in sorted(row.signals.items())) or "-"
        print(
            f"{row.name:<72} {row.records:>7} {row.turns:>5} {row.user_turns:>4}  {row.outcome:<22} {kinds}"
        )
    scores, notes = score_heldout(transcripts)
    print("\nHeld-out split (tests/data/transcripts/labels-heldout.json, per user turn):")
    for key in ORIGINS:
        print("  " + scores[key].line(f"held-out {key}"))
    print("  " + score_tuned().line("tuned-on (signals_labelled, per line)"))
    print("\nDisagreements:" if notes else "\nDisagreements: none")
    for note in notes:
        print("  " + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
