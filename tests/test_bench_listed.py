"""``make bench`` regenerates every figure: each ``bench/bench_*.py`` is run by its target.

A benchmark script that ``make bench`` does not run leaves its figures in
docs/BENCHMARKS.md to go stale while the code under them changes (issue 22 item 8: four
scripts were missing).
"""

from __future__ import annotations

import re

from support import ROOT


def _bench_target() -> str:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^bench: .*?\n((?:\t.*\n)+)", text, re.M)
    assert match, "the Makefile has a bench target"
    return match.group(1)


def test_every_bench_script_is_run_by_make_bench() -> None:
    scripts = sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))
    target = _bench_target()
    missing = [name for name in scripts if f"bench/{name}" not in target]
    assert scripts and missing == [], f"not run by make bench: {missing}"


def test_every_bench_script_is_named_in_the_benchmarks_doc() -> None:
    doc = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    scripts = sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))
    missing = [name for name in scripts if f"bench/{name}" not in doc]
    assert missing == [], f"no figures in docs/BENCHMARKS.md for: {missing}"
