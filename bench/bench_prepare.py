"""Benchmark the $0 front end: speed and memory of read_transcript + prepare, slice size
against the original's rules, and detector precision/recall on the labelled set.

Run: .venv/bin/python bench/bench_prepare.py
Targets: ≤ 0.25 s for a 1.5 MB transcript; memory flat in transcript size.
"""

from __future__ import annotations

import itertools
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reflect_jobs.cascade import (  # noqa: E402
    EmptyLedger,
    detect_signals,
    detect_signals_original,
    prepare,
    slice_dialogue_original,
)
from reflect_jobs.transcripts import Turn, read_transcript  # noqa: E402

REAL_DIR = Path("/work/shared/data/transcripts/claude-code")
LABELLED = ROOT / "tests" / "data" / "signals_labelled.jsonl"
SIZES_MB = (0.2, 1.5, 15)
ORIGINAL_SCAN_CAP = 600_000  # the original extractor's front-anchored cap (SPEC §2.1)


def real_records() -> list[str]:
    lines: list[str] = []
    for path in sorted(REAL_DIR.glob("*.jsonl")):
        lines += [ln for ln in path.read_text().splitlines() if ln.strip()]
    return lines


def corrections() -> list[str]:
    rows = [json.loads(ln) for ln in LABELLED.read_text().splitlines()]
    return [r["text"] for r in rows if r["signal"] and r["role"] == "user"]


def generate(path: Path, size: int, records: list[str], fixes: list[str]) -> None:
    """Real records cycled, a synthetic human correction every 40 records, up to ``size``."""
    fix_iter = itertools.cycle(fixes)
    written = 0
    with path.open("w") as fh:
        for n, line in enumerate(itertools.cycle(records)):
            if written >= size:
                break
            if n % 40 == 39:
                rec = {"type": "user", "message": {"role": "user", "content": next(fix_iter)}}
                line = json.dumps(rec)
            fh.write(line + "\n")
            written += len(line) + 1


def run_once(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    transcript = read_transcript(path)
    out = prepare(transcript, EmptyLedger(), source_name=path.name)
    return time.perf_counter() - start, len(out.slice_text)


def bench_sizes() -> None:
    print("## read_transcript + prepare on generated Claude Code transcripts")
    print(
        f"{'size':>8} {'best s':>8} {'median s':>9} {'slice':>7} {'tracemalloc':>12} {'maxrss':>9}"
    )
    records, fixes = real_records(), corrections()
    with tempfile.TemporaryDirectory() as tmp:
        for mb in SIZES_MB:
            path = Path(tmp) / f"gen-{mb}mb.jsonl"
            generate(path, int(mb * 1024 * 1024), records, fixes)
            times = []
            slice_chars = 0
            for _ in range(5 if mb < 10 else 3):
                elapsed, slice_chars = run_once(path)
                times.append(elapsed)
            tracemalloc.start()
            run_once(path)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
            times.sort()
            print(
                f"{path.stat().st_size / 1e6:>6.2f}MB {times[0]:>8.3f} {times[len(times) // 2]:>9.3f}"
                f" {slice_chars:>7} {peak / 1e6:>10.2f}MB {rss_mb:>7.1f}MB"
            )
    print("(maxrss is the process high-water mark so far; it is monotonic across rows)\n")


def original_dialogue(path: Path) -> str:
    """The original ``extract_dialogue`` (SPEC §2.1): text blocks incl. isMeta, front cap."""
    parts: list[str] = []
    total = 0
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            found = [content]
        elif isinstance(content, list):
            found = [
                b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"
            ]
        else:
            found = []
        for part in found:
            if part:
                parts.append(part)
                total += len(part)
        if total >= ORIGINAL_SCAN_CAP:
            break
    return "\n".join(parts)


def bench_slices() -> None:
    print("## slice chars per real transcript: ours vs the original's rules")
    print(
        f"{'transcript':<42} {'dialogue':>8} {'orig sig':>8} {'orig slice':>10} {'our sig':>7} {'ours':>6}  verdict"
    )
    for path in sorted(REAL_DIR.glob("*.jsonl")):
        dialogue = original_dialogue(path)
        osigs = detect_signals_original(dialogue)
        oslice = slice_dialogue_original(dialogue, osigs) if osigs else ""
        if osigs and not oslice.strip():
            oslice = dialogue[:60_000]
        transcript = read_transcript(path)
        out = prepare(transcript, EmptyLedger(), source_name=path.name)
        print(
            f"{path.name:<42} {len(dialogue):>8} {len(osigs):>8} {len(oslice):>10}"
            f" {out.signal_count:>7} {len(out.slice_text):>6}  {out.action}/{out.reason}"
        )
    print()


def bench_labelled() -> None:
    rows = [json.loads(ln) for ln in LABELLED.read_text().splitlines()]

    def score(predict) -> str:
        tp = sum(1 for r in rows if r["signal"] and predict(r))
        fp = sum(1 for r in rows if not r["signal"] and predict(r))
        fn = sum(1 for r in rows if r["signal"] and not predict(r))
        human = [r for r in rows if r["signal"] and r["role"] == "user"]
        hr = sum(1 for r in human if predict(r)) / len(human)
        flagged = (tp + fp) / len(rows)
        return (
            f"precision {tp / max(tp + fp, 1):.3f}  recall {tp / max(tp + fn, 1):.3f}  "
            f"human-correction recall {hr:.3f}  lines flagged {flagged:.1%}"
        )

    print(
        f"## detectors on {LABELLED.name} ({len(rows)} lines, {sum(r['signal'] for r in rows)} signals)"
    )
    print("ours:     " + score(lambda r: bool(detect_signals([Turn(0, r["role"], r["text"])]))))
    print("original: " + score(lambda r: bool(detect_signals_original(r["text"]))))


def main() -> None:
    bench_sizes()
    bench_slices()
    bench_labelled()


if __name__ == "__main__":
    main()
