"""The $0 front end against the original's rules, measured in the same run.

Run: .venv/bin/python bench/bench_prepare.py [sizes|slices|labelled|growing ...]

Three tables, each ours beside the baseline ``bench/original_signals.py`` (the original's
detector and slicer) with the ratio ours / original:

1. time and tracemalloc peak of ``read_transcript`` + ``prepare`` against the original's
   extractor + detector + slicer, on Claude Code transcripts of 0.2, 1.5 and 15 MB generated
   from the real ones (real records cycled, a human correction every 40 records); plus our
   peak at each size against our peak at the smallest (the transcript grows 75x);
2. slice characters per real transcript (``tests/data/transcripts/claude-code``);
3. precision / recall of the two detectors on ``tests/data/signals_labelled.jsonl``;
4. slice characters sent per capture of a session captured after every turn, delta retain
   by chunk hash alone (what ran before the session watermark) against the watermark, both
   in this run over the same growing file.

Times are CPU seconds of this process, ours and the original's calls interleaved; the machine
is shared, so compare the ratios, not the seconds.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from original_signals import detect_signals_original, slice_dialogue_original  # noqa: E402

from reflect_jobs.cascade import EmptyLedger, detect_signals, prepare  # noqa: E402
from reflect_jobs.transcripts import Turn, read_transcript  # noqa: E402

REAL_DIR = ROOT / "tests" / "data" / "transcripts" / "claude-code"
LABELLED = ROOT / "tests" / "data" / "signals_labelled.jsonl"
SIZES_MB = (0.2, 1.5, 15)
ORIGINAL_SCAN_CAP = 600_000  # the original extractor's front-anchored cap (SPEC-drain §2.1)
ORIGINAL_SLICE_CAP = 60_000


def real_records() -> list[str]:
    """Every non-blank record line of the real transcripts, in file order."""
    lines: list[str] = []
    for path in sorted(REAL_DIR.glob("*.jsonl")):
        lines += [ln for ln in path.read_text().splitlines() if ln.strip()]
    return lines


def corrections() -> list[str]:
    """The human corrections of the labelled set (the lines a reflection must not lose)."""
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


def original_dialogue(path: Path) -> str:
    """The original ``extract_dialogue`` (SPEC-drain §2.1): text blocks incl. isMeta, front cap."""
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


def original_slice(path: Path) -> tuple[int, str]:
    """The original's front end for one transcript: (signal count, slice sent)."""
    dialogue = original_dialogue(path)
    signals = detect_signals_original(dialogue)
    piece = slice_dialogue_original(dialogue, signals) if signals else ""
    if signals and not piece.strip():
        piece = dialogue[:ORIGINAL_SLICE_CAP]
    return len(signals), piece


def ours_slice(path: Path) -> tuple[int, str, str]:
    """Our front end for one transcript: (signal count, slice, verdict)."""
    out = prepare(read_transcript(path), EmptyLedger(), source_name=path.name)
    return out.signal_count, out.slice_text, f"{out.action}/{out.reason}"


def measure(fns: list[Callable[[], object]], runs: int) -> list[tuple[float, float]]:
    """Per function: median CPU seconds over ``runs`` calls, tracemalloc peak (MB) of one more.

    The functions are called in turn (a, b, a, b…) so that a load change on the shared
    machine hits both alike; CPU time (``time.process_time``) rather than wall time, because
    the work is single-threaded Python and other processes' load must not count.
    """
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, out in zip(fns, times, strict=True):
            start = time.process_time()
            fn()
            out.append(time.process_time() - start)
    peaks = []
    for fn in fns:
        tracemalloc.start()
        fn()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peaks.append(peak / 1e6)
    return [(statistics.median(t), p) for t, p in zip(times, peaks, strict=True)]


def bench_sizes() -> None:
    print("## read_transcript + prepare vs the original's extractor + detector + slicer")
    print("| transcript | ours CPU median | original CPU median | time ours/orig |", end="")
    print(" ours peak | original peak | peak ours/orig | our peak / our smallest |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    records, fixes = real_records(), corrections()
    first_peak = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for mb in SIZES_MB:
            path = Path(tmp) / f"gen-{mb}mb.jsonl"
            generate(path, int(mb * 1024 * 1024), records, fixes)
            runs = 5 if mb < 10 else 3
            (ours_s, ours_peak), (orig_s, orig_peak) = measure(
                [lambda p=path: ours_slice(p), lambda p=path: original_slice(p)], runs
            )
            first_peak = first_peak or ours_peak
            print(
                f"| {path.stat().st_size / 1e6:.2f} MB | {ours_s:.3f} s | {orig_s:.3f} s |"
                f" {ours_s / orig_s:.2f}x | {ours_peak:.2f} MB | {orig_peak:.2f} MB |"
                f" {ours_peak / orig_peak:.3f}x | {ours_peak / first_peak:.1f}x |"
            )
    print()


def bench_slices() -> None:
    print(f"## slice chars per real transcript ({REAL_DIR.relative_to(ROOT)}), ours vs original")
    print("| transcript | dialogue | original signals / slice | ours signals / slice |", end="")
    print(" slice ours/orig | our verdict |")
    print("|---|---:|---:|---:|---:|---|")
    tot_orig = tot_ours = 0
    for path in sorted(REAL_DIR.glob("*.jsonl")):
        dialogue = original_dialogue(path)
        osigs, oslice = original_slice(path)
        nsigs, nslice, verdict = ours_slice(path)
        tot_orig += len(oslice)
        tot_ours += len(nslice)
        ratio = f"{len(nslice) / len(oslice):.2f}x" if oslice else "-"
        print(
            f"| {path.stem} | {len(dialogue):,} | {osigs} / {len(oslice):,} |"
            f" {nsigs} / {len(nslice):,} | {ratio} | {verdict} |"
        )
    print(f"| **all** | | {tot_orig:,} | {tot_ours:,} | {tot_ours / max(tot_orig, 1):.2f}x | |\n")


def bench_labelled() -> None:
    rows = [json.loads(ln) for ln in LABELLED.read_text().splitlines()]

    def score(predict: Callable[[dict], bool]) -> dict[str, float]:
        tp = sum(1 for r in rows if r["signal"] and predict(r))
        fp = sum(1 for r in rows if not r["signal"] and predict(r))
        fn = sum(1 for r in rows if r["signal"] and not predict(r))
        human = [r for r in rows if r["signal"] and r["role"] == "user"]
        return {
            "precision": tp / max(tp + fp, 1),
            "recall": tp / max(tp + fn, 1),
            "human-correction recall": sum(1 for r in human if predict(r)) / len(human),
            "lines flagged": (tp + fp) / len(rows),
        }

    ours = score(lambda r: bool(detect_signals([Turn(0, r["role"], r["text"])])))
    orig = score(lambda r: bool(detect_signals_original(r["text"])))
    n_sig = sum(r["signal"] for r in rows)
    print(f"## detectors on {LABELLED.name} ({len(rows)} lines, {n_sig} signals)")
    print("| | ours | original | ours/orig |")
    print("|---|---:|---:|---:|")
    for key in ours:
        print(f"| {key} | {ours[key]:.3f} | {orig[key]:.3f} | {ours[key] / orig[key]:.2f}x |")


class _ChunkLedger(EmptyLedger):
    """Remembers the chunk hashes a committed add would record (delta retain by hash)."""

    def __init__(self) -> None:
        self.chunks: set[str] = set()

    def seen_chunk_hashes(self, hashes: list[str]) -> set[str]:
        return self.chunks & set(hashes)


def bench_growing(turns: int = 12) -> None:
    """A session of ``turns`` exchanges (a correction each, 2 filler exchanges between)
    captured after every turn: the slice each capture sends, by chunk hash alone and with
    the watermark, both fed what the previous capture committed."""
    fixes = corrections()
    by_hash, with_mark = _ChunkLedger(), _ChunkLedger()
    mark = 0
    rows: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grow.jsonl"
        with path.open("w") as fh:
            for k in range(turns):
                for j in range(2):
                    for role, text in (("user", f"Open m{k}_{j}.py"), ("assistant", "Opened.")):
                        rec = {"type": role, "message": {"role": role, "content": text}}
                        fh.write(json.dumps(rec) + "\n")
                rec = {"type": "user", "message": {"role": "user", "content": fixes[k]}}
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                old = prepare(read_transcript(path), by_hash, source_name=path.name)
                t = read_transcript(path, prefix_at=mark)
                new = prepare(t, with_mark, source_name=path.name, since_offset=mark)
                by_hash.chunks.update(old.new_chunk_hashes)
                with_mark.chunks.update(new.new_chunk_hashes)
                mark = t.end_offset  # the add committed: the watermark moves
                rows.append((len(old.slice_text), len(new.slice_text)))
    print(f"## slice chars sent per capture of a growing session ({turns} captures)")
    print("| capture | chunk hash only (before) | watermark (after) | after/before |")
    print("|---:|---:|---:|---:|")
    for i, (old_n, new_n) in enumerate(rows, 1):
        print(f"| {i} | {old_n:,} | {new_n:,} | {new_n / max(old_n, 1):.2f}x |")
    tot_old, tot_new = sum(r[0] for r in rows), sum(r[1] for r in rows)
    print(f"| **all** | {tot_old:,} | {tot_new:,} | {tot_new / max(tot_old, 1):.2f}x |\n")


def main() -> None:
    print("$ .venv/bin/python bench/bench_prepare.py\n")
    only = sys.argv[1:]
    if not only or "sizes" in only:
        bench_sizes()
    if not only or "slices" in only:
        bench_slices()
    if not only or "labelled" in only:
        bench_labelled()
    if not only or "growing" in only:
        bench_growing()


if __name__ == "__main__":
    main()
