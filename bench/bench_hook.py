"""Hook latency: reflect-jobs-hook as a whole process vs a bare interpreter of the same venv.

Run: .venv/bin/python bench/bench_hook.py [--runs N]

Prints median and p95 wall time of ``python -c pass`` (the baseline), of the hook on a
small and on a ~1.5 MB transcript (the hook must not read the transcript, so size must not
matter), of the hook when its queue cannot take the message — a SQLite queue write-locked by
this script, a Redis URL nobody listens on — so the capture goes to the spool after the push
budget (the harnesses kill a hook after 1–1.5 s), and of ``python -c "import huey"`` (what
the hook would pay for importing the queue library instead of writing Huey's message bytes
itself), each as a ratio to the baseline. Two rows read the user config file the way an
installed hook does (no ``REFLECT_HOME`` in the environment: the file names the home): one
as ``install`` writes it (flat: read without ``tomllib``), one with a table in it (the file
then goes through ``tomllib``, ~5 ms of imports). ``REFLECT_QUEUE_URL`` in the environment is the
queue of the two ordinary hook rows (default: a SQLite file in a temporary home).
The commands are run in turn (bare, hook small, hook big, import huey, bare, …) so that a
load change on the shared machine hits all of them alike: compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, read, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redacted(url: str) -> str:
    """``url`` without its password, for the printed header."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}://{creds.split(':')[0]}:***@{host}" if sep and at and ":" in creds else url


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
        locked_home = Path(tmp) / "locked"
        locked_home.mkdir()
        locked_env = {**env, "REFLECT_HOME": str(locked_home)}
        locked_env.pop("REFLECT_QUEUE_URL", None)
        down_env = {**env, "REFLECT_HOME": str(Path(tmp) / "down")}
        down_env["REFLECT_QUEUE_URL"] = f"redis://127.0.0.1:{closed_port()}/0"
        configured: dict[str, dict[str, str]] = {}
        for kind, extra in (("flat", ""), ("tomllib", "\n[later]\nx = 1\n")):
            xdg = Path(tmp) / f"xdg-{kind}"
            (xdg / "reflect-jobs").mkdir(parents=True)
            (xdg / "reflect-jobs" / "config.toml").write_text(
                f'home = "{tmp}/cfg-{kind}"\nkb_path = "{tmp}/kb"\nwriter_backend = "auto"\n'
                f'model = "sonnet"\nrecall_on_prompt = false\nignore = []\n{extra}'
            )
            e = {k: v for k, v in env.items() if k != "REFLECT_HOME"}
            configured[kind] = {**e, "XDG_CONFIG_HOME": str(xdg)}
        small = ROOT / "samples" / "hello-world-script.jsonl"
        big = Path(tmp) / "big.jsonl"
        src = (ROOT / "samples" / "python-to-rust-port.jsonl").read_bytes()
        with big.open("wb") as fh:
            while fh.tell() < 1_500_000:
                fh.write(src)

        def hook(name: str, path: Path, e: dict[str, str]) -> tuple[list[str], bytes, dict]:
            payload = {"session_id": name, "transcript_path": str(path), "hook_event_name": "Stop"}
            return [str(BIN / "reflect-jobs-hook"), "claude"], json.dumps(payload).encode(), e

        commands = {
            "bare `python -c pass`": ([sys.executable, "-c", "pass"], b"", env),
            f"hook, {small.stat().st_size / 1e3:.0f} KB transcript": hook("small", small, env),
            f"hook, {big.stat().st_size / 1e6:.1f} MB transcript": hook("big", big, env),
            "hook, home from the config file (flat)": hook("cfg", small, configured["flat"]),
            "hook, config file with a table (tomllib)": hook("cfgt", small, configured["tomllib"]),
            "hook, SQLite queue write-locked (spooled)": hook("locked", small, locked_env),
            "hook, Redis queue down (spooled)": hook("down", small, down_env),
            '`python -c "import huey"`': ([sys.executable, "-c", "import huey"], b"", env),
        }
        results: dict[str, list[float]] = {name: [] for name in commands}
        for argv, stdin, e in commands.values():  # one untimed run each: warm the page cache
            timed_once(argv, stdin, e)
        lock = sqlite3.connect(locked_home / "queue.db", isolation_level=None)
        lock.execute("begin immediate")  # held for every timed run of the locked row
        try:
            for _ in range(args.runs):
                for name, (argv, stdin, e) in commands.items():
                    results[name].append(timed_once(argv, stdin, e))
        finally:
            lock.execute("rollback")
            lock.close()
        with sqlite3.connect(locked_home / "queue.db") as conn:
            pushed = conn.execute("select count(*) from task").fetchone()[0]
    bare = results["bare `python -c pass`"]
    queue = redacted(os.environ.get("REFLECT_QUEUE_URL") or "sqlite:///<tmp>/queue.db")
    print(f"$ .venv/bin/python bench/bench_hook.py --runs {args.runs}\n")
    print(f"hook latency, {args.runs} interleaved runs each ({sys.executable}); queue {queue}")
    print(f"(the locked queue took {pushed} message(s): only the untimed warm-up run's)")
    print("| | median | p95 | median ratio to bare |")
    print("|---|---:|---:|---:|")
    for name, xs in results.items():
        ratio = statistics.median(xs) / statistics.median(bare)
        print(f"| {name} | {statistics.median(xs):.1f} ms | {p95(xs):.1f} ms | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
