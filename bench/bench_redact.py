"""Secret redaction speed: ours against the pre-hardening redactor, measured in the same run.

Run: .venv/bin/python bench/bench_redact.py [--mb 1] [--runs 3]

``prepare`` redacts every turn of a transcript, so redaction is paid on multi-MB sessions.
Two inputs built from the real transcripts in ``tests/data/transcripts/claude-code`` (cycled
to ``--mb`` MB): the turns' dialogue text as ``prepare`` sees it, and the raw JSONL (denser
in ``"key": value`` pairs, the worst case for the keyword pass). Each is redacted by ours
(``reflect_jobs.redaction.redact_secrets``, 80 shapes) and by the baseline
``bench/baseline_redact.py`` (the 30-shape redactor before the hardening issue), calls
interleaved; we print the median CPU seconds, MB/s and the ratio ours / baseline. The
machine is shared: compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from baseline_redact import redact_secrets as baseline  # noqa: E402

from reflect_jobs.redaction import redact_secrets as ours  # noqa: E402
from reflect_jobs.transcripts import read_transcript  # noqa: E402

REAL_DIR = ROOT / "tests" / "data" / "transcripts" / "claude-code"


def cycled(text: str, size: int) -> str:
    """``text`` repeated (newline-joined) and cut to ``size`` characters."""
    parts, total = [], 0
    while total < size:
        parts.append(text)
        total += len(text) + 1
    return "\n".join(parts)[:size]


def inputs(size: int) -> dict[str, str]:
    """The two inputs: the real transcripts' dialogue text, and their raw JSONL."""
    paths = sorted(REAL_DIR.glob("*.jsonl"))
    dialogue = "\n".join(t.text for p in paths for t in read_transcript(p).turns)
    raw = "\n".join(p.read_text(encoding="utf-8") for p in paths)
    return {"dialogue text": cycled(dialogue, size), "raw JSONL": cycled(raw, size)}


def median_cpu(fns: list[Callable[[], object]], runs: int) -> list[float]:
    """Median CPU seconds per function, the functions called in turn (a, b, a, b…)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, out in zip(fns, times, strict=True):
            start = time.process_time()
            fn()
            out.append(time.process_time() - start)
    return [statistics.median(t) for t in times]


def main() -> None:
    """Print one row per input: seconds, MB/s and the ratio ours / baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0, help="input size in MB")
    parser.add_argument("--runs", type=int, default=3, help="timed calls per function")
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    print(f"redaction of {args.mb:g} MB, median CPU s of {args.runs} runs")
    print(f"{'input':<14} {'ours s':>8} {'base s':>8} {'ours MB/s':>10} {'ratio':>6}  hits o/b")
    for name, text in inputs(size).items():
        t_ours, t_base = median_cpu([lambda t=text: ours(t), lambda t=text: baseline(t)], args.runs)
        hits = f"{ours(text)[1]}/{baseline(text)[1]}"
        mbs = args.mb / t_ours if t_ours else float("inf")
        print(f"{name:<14} {t_ours:8.3f} {t_base:8.3f} {mbs:10.1f} {t_ours / t_base:6.2f}  {hits}")


if __name__ == "__main__":
    main()
