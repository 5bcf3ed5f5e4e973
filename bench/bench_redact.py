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

Before that, the figures issue 21 asks of the engine (``bench/redaction_probe.py`` computes
them, ``tests/test_redaction_fp.py`` asserts them):

(a) false-positive ``[REDACTED`` tags per 1,000 lines on the real transcripts of
    ``tests/data/transcripts`` (``fp-corpus/`` and the real ``claude-code/``, ``codex/``
    files; none holds a credential), over the dialogue lines ``prepare`` redacts and over the
    raw JSONL lines; each false positive is printed with 60 characters of context (``--show``);
(b) credential shapes caught, N/N, of ``tests/secret_corpus.py`` and
    ``tests/secret_corpus_heldout.py``: in the transcript (read back from a real JSONL file
    as dialogue, and as the raw line) and echoed into a model answer through
    ``redact_structured``; and the look-alikes kept unchanged on the same three paths;
(c) field integrity: which fields of a clean model answer redaction changed.
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

import redaction_probe as probe  # noqa: E402
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


def _fp_section(show: int) -> None:
    """(a): tags per 1,000 lines on the real transcripts, then the false positives."""
    files = probe.fp_corpus_files()
    dialogue, raw = probe.scan_dialogue(files), probe.scan_raw(files)
    print(f"(a) false positives on {len(files)} real transcripts (no credential in them)")
    print(f"{'input':<16} {'files':>5} {'lines':>7} {'tags':>5} {'per 1,000':>9}")
    for name, scan in (("dialogue", dialogue), ("raw JSONL", raw)):
        print(f"{name:<16} {scan.files:5d} {scan.lines:7d} {scan.tags:5d} {scan.per_1000:9.2f}")
    shown = 0
    for name, scan in (("dialogue", dialogue), ("raw JSONL", raw)):
        groups: dict[str, list[probe.FalsePositive]] = {}
        for fp in scan.samples:
            groups.setdefault(fp.context, []).append(fp)
        if groups:
            print(f"  {name} false positives ({len(groups)} distinct of {scan.tags}):")
        for context, fps in groups.items():
            if shown >= show:
                print(f"    … {len(groups)} in all; --show N prints more")
                break
            more = f" (x{len(fps)})" if len(fps) > 1 else ""
            print(f"    {fps[0].file}:{fps[0].line}{more}: …{context}…")
            shown += 1


def _credential_section(show: int) -> None:
    """(b): credentials caught on each path, look-alikes kept, and what went wrong."""
    results = probe.check_cases(probe.cases())
    print("\n(b) credentials caught (any form left anywhere = missed)")
    print(f"{'corpus':<9} {'shapes':>6} {'dialogue':>9} {'raw JSONL':>9} {'echoed':>9}")
    for corpus in ("existing", "held-out", None):
        rs = [r for r in results if corpus is None or r.case.corpus == corpus]
        n = len(rs)
        cells = [
            f"{sum(getattr(r, p) is True for r in rs)}/{n}" for p in ("dialogue", "raw", "echo")
        ]
        print(f"{corpus or 'both':<9} {n:6d} {cells[0]:>9} {cells[1]:>9} {cells[2]:>9}")
    missed = [r for r in results if not (r.dialogue and r.raw and r.echo)]
    for r in missed[:show]:
        paths = [
            p for p, ok in (("dialogue", r.dialogue), ("raw", r.raw), ("echo", r.echo)) if not ok
        ]
        out = r.dialogue_out if r.dialogue is False else r.raw_out if not r.raw else r.echo_out
        print(
            f"  missed {r.case.corpus}:{r.case.name} [{','.join(paths)}]: …{probe.excerpt(r.case.secret, out)}…"
        )
    looks = probe.check_lookalikes(probe.lookalikes())
    n = len(looks)
    cells = [f"{sum(getattr(r, p) for r in looks)}/{n}" for p in ("dialogue", "raw", "echo")]
    print(f"{'look-alikes kept':<16} {cells[0]:>9} {cells[1]:>9} {cells[2]:>9}")
    for r in [r for r in looks if not (r.dialogue and r.raw and r.echo)][:show]:
        paths = [
            p for p, ok in (("dialogue", r.dialogue), ("raw", r.raw), ("echo", r.echo)) if not ok
        ]
        out = probe.first_difference(r.text, r.dialogue_out) if not r.dialogue else r.raw_out[:120]
        print(f"  changed {r.name} [{','.join(paths)}]: {r.text[:50]!r} -> …{out}…")


def _integrity_section() -> None:
    """(c): the clean answer's fields that redaction changed."""
    leaves, changed = probe.field_integrity()
    print(
        f"\n(c) field integrity: {leaves - len(changed)}/{leaves} fields of a clean answer verbatim"
    )
    for path, before, after in changed:
        print(f"  changed {path}: {str(before)[:50]!r} -> {str(after)[:50]!r}")


def main() -> None:
    """Print issue 21's figures, then one row per input: seconds, MB/s, ratio ours / baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0, help="input size in MB")
    parser.add_argument("--runs", type=int, default=3, help="timed calls per function")
    parser.add_argument("--show", type=int, default=30, help="lines of examples per section")
    args = parser.parse_args()
    _fp_section(args.show)
    _credential_section(args.show)
    _integrity_section()
    size = int(args.mb * 1_000_000)
    print(f"\n(d) redaction of {args.mb:g} MB, median CPU s of {args.runs} runs")
    print(f"{'input':<14} {'ours s':>8} {'base s':>8} {'ours MB/s':>10} {'ratio':>6}  hits o/b")
    for name, text in inputs(size).items():
        t_ours, t_base = median_cpu([lambda t=text: ours(t), lambda t=text: baseline(t)], args.runs)
        hits = f"{ours(text)[1]}/{baseline(text)[1]}"
        mbs = args.mb / t_ours if t_ours else float("inf")
        print(f"{name:<14} {t_ours:8.3f} {t_base:8.3f} {mbs:10.1f} {t_ours / t_base:6.2f}  {hits}")


if __name__ == "__main__":
    main()
