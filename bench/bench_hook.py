"""Hook latency: reflect-jobs-hook as a whole process vs a bare interpreter of the same venv.

Run: .venv/bin/python bench/bench_hook.py [--runs N]
Prints median and p95 wall time for `python -c pass` and for the hook on a small and on a
~1.5 MB transcript (the hook must not read the transcript, so size must not matter), and
the ratio hook/bare. Machines are shared and noisy: compare within one run.
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


def timed(argv: list[str], stdin: bytes, env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, input=stdin, env=env, check=True, stdout=subprocess.DEVNULL)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs):6.1f} ms  p95 {xs[int(len(xs) * 0.95) - 1]:6.1f} ms"


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
        bare = timed([sys.executable, "-c", "pass"], b"", env, args.runs)
        results = {"bare": bare}
        for name, path in (("hook small", small), ("hook 1.5MB", big)):
            payload = json.dumps(
                {"session_id": name, "transcript_path": str(path), "hook_event_name": "Stop"}
            ).encode()
            results[name] = timed(
                [str(BIN / "reflect-jobs-hook"), "claude"], payload, env, args.runs
            )
        print(f"hook latency, {args.runs} runs each ({sys.executable})")
        for name, xs in results.items():
            ratio = statistics.median(xs) / statistics.median(bare)
            print(f"  {name:11s} {fmt(xs)}  ratio to bare {ratio:4.2f}x")
        print(f"  transcript sizes: small {small.stat().st_size} B, big {big.stat().st_size} B")


if __name__ == "__main__":
    main()
