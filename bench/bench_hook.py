"""Hook latency: reflect-jobs-hook as a whole process vs a bare interpreter of the same venv.

Run: .venv/bin/python bench/bench_hook.py [--runs N]

Prints median and p95 wall time of ``python -c pass`` (the baseline), of the hook on a
small and on a ~1.5 MB transcript (the hook must not read the transcript, so size must not
matter), and of ``python -c "import huey"`` (what the hook would pay for importing the queue
library instead of writing Huey's message bytes itself), each as a ratio to the baseline.
The commands are run in turn (bare, hook small, hook big, import huey, bare, …) so that a
load change on the shared machine hits all of them alike: compare the ratios.
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
BIN = Path(sys.executable).parent


def timed_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    """Wall milliseconds of one run of ``argv`` fed ``stdin``."""
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(int(len(xs) * 0.95) - 1, 0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "REFLECT_HOME": tmp}
        small = ROOT / "samples" / "hello-world-script.jsonl"
        big = Path(tmp) / "big.jsonl"
        src = (ROOT / "samples" / "python-to-rust-port.jsonl").read_bytes()
        with big.open("wb") as fh:
            while fh.tell() < 1_500_000:
                fh.write(src)

        def hook(name: str, path: Path) -> tuple[list[str], bytes]:
            payload = {"session_id": name, "transcript_path": str(path), "hook_event_name": "Stop"}
            return [str(BIN / "reflect-jobs-hook"), "claude"], json.dumps(payload).encode()

        commands = {
            "bare `python -c pass`": ([sys.executable, "-c", "pass"], b""),
            f"hook, {small.stat().st_size / 1e3:.0f} KB transcript": hook("small", small),
            f"hook, {big.stat().st_size / 1e6:.1f} MB transcript": hook("big", big),
            '`python -c "import huey"`': ([sys.executable, "-c", "import huey"], b""),
        }
        results: dict[str, list[float]] = {name: [] for name in commands}
        for argv, stdin in commands.values():  # one untimed run each: warm the page cache
            timed_once(argv, stdin, env)
        for _ in range(args.runs):
            for name, (argv, stdin) in commands.items():
                results[name].append(timed_once(argv, stdin, env))
    bare = results["bare `python -c pass`"]
    print(f"$ .venv/bin/python bench/bench_hook.py --runs {args.runs}\n")
    print(f"hook latency, {args.runs} interleaved runs each ({sys.executable})")
    print("| | median | p95 | median ratio to bare |")
    print("|---|---:|---:|---:|")
    for name, xs in results.items():
        ratio = statistics.median(xs) / statistics.median(bare)
        print(f"| {name} | {statistics.median(xs):.1f} ms | {p95(xs):.1f} ms | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
