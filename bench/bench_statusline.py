"""Status-line latency: ``reflect-jobs statusline`` as a whole process vs a bare interpreter.

Run: .venv/bin/python bench/bench_statusline.py [--runs N] [--items N]

Claude Code runs its statusLine command after every message, so the segment must cost about
an interpreter start-up (issue 26: median ≤ 2.5× ``python -c pass`` of the same venv). A
temporary home holds one repository with ``--items`` open items (a fifth of them handoffs);
the rows, run in turn so a load change on the shared machine hits them alike:

* **bare** — ``python -c pass`` (the baseline);
* **statusline (cached)** — the console script's path (``reflect_jobs.entry``) with Claude
  Code's JSON on stdin, the cache fresh: a stat scan of the log directory and one small file;
* **statusline (logs changed)** — the same after the log's mtime moved (the counts are taken
  again from the index, as the session-start hook reads items, and the cache rewritten);
* **reflect-jobs --help** — what a click CLI start costs (the dispatcher avoids it).

Prints median and p95 in milliseconds and each median as a ratio to the bare interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = (
    "import sys; sys.argv = ['reflect-jobs', *sys.argv[1:]];"
    "from reflect_jobs.entry import main; sys.exit(main())"
)


def timed_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    """Wall milliseconds of one run of ``argv`` fed ``stdin``."""
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def p95(xs: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    return sorted(xs)[max(int(len(xs) * 0.95) - 1, 0)]


def main() -> int:
    """Build the home, run the rows in turn, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--items", type=int, default=200)
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="rj-bench-sl-") as tmp:
        root = Path(tmp)
        repo = root / "shop"
        (repo / ".git").mkdir(parents=True)
        (repo / ".git" / "config").write_text(
            '[remote "origin"]\n\turl = git@github.com:acme/shop.git\n', encoding="utf-8"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("REFLECT_")}
        env.update(
            REFLECT_HOME=str(root / "home"),
            GLOBAL_LEARNINGS_PATH=str(root / "kb"),
            PYTHONPATH=str(ROOT),
        )
        os.environ.update(env)
        from reflect_jobs.reflections.store import open_store

        store = open_store(str(repo), repo, env)
        for i in range(args.items):
            store.add("handoff" if i % 5 == 0 else "action", f"Item {i} to do", None)
        log = next(iter(store.log_dir.glob("*.jsonl"))) if hasattr(store, "log_dir") else None
        store.close()
        if log is None:
            log = next((root / "kb").rglob("*.jsonl"))
        payload = json.dumps(
            {"session_id": "s", "workspace": {"current_dir": str(repo)}, "cwd": str(repo)}
        ).encode()
        line = [py, "-c", ENTRY, "statusline"]
        first = subprocess.run(line, input=payload, env=env, capture_output=True, check=True)
        rows: dict[str, list[float]] = {
            "bare python -c pass": [],
            "statusline (cached)": [],
            "statusline (logs changed)": [],
            "reflect-jobs --help (click)": [],
        }
        for n in range(args.runs):
            rows["bare python -c pass"].append(timed_once([py, "-c", "pass"], b"", env))
            rows["statusline (cached)"].append(timed_once(line, payload, env))
            stamp = time.time() + n + 1
            os.utime(log, (stamp, stamp))  # the log moved: the cache entry is invalid
            rows["statusline (logs changed)"].append(timed_once(line, payload, env))
            rows["reflect-jobs --help (click)"].append(
                timed_once([py, "-c", ENTRY, "--help"], b"", env)
            )
    base = statistics.median(rows["bare python -c pass"])
    print(f"segment: {first.stdout.decode().strip()!r}; {args.items} items, {args.runs} runs")
    print(f"{'command':<30} {'median ms':>9} {'p95 ms':>8} {'× bare':>7}")
    for name, xs in rows.items():
        med = statistics.median(xs)
        print(f"{name:<30} {med:>9.1f} {p95(xs):>8.1f} {med / base:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
