"""Issue 24 items 2–3 at size: a hostile synced log, a huge transcript line, a big KB.

Run: .venv/bin/python bench/bench_hostile_store.py [--events 100000,1000000] [--notes 100000]
     [--transcript-mb 100] [--runs 9] [--only sessionstart,reindex,transcript]

1. **SessionStart** (``reflect-jobs-hook claude``) in a repository whose memory home holds a
   synced host log of N events (``bench/hostile_logs.py``, ~170 bytes an event), beside this
   host's 20 open items and a context store of 1,000 learnings: medians of ``--runs`` runs,
   interleaved with ``python -c pass`` (the bare interpreter) so a load change on the shared
   machine hits both: compare the ratios. Measured twice: right after the sync (the index
   has not read the log: the hook reads the committed index and leaves a request) and after
   the worker's refresh (the index matches the logs).
2. **The worker's refresh of that log** (the fold: ingest, fold, ids, FTS), in a child
   process: wall and CPU seconds and peak RSS (``ru_maxrss``). The target is ≤ 200 MB at
   1,000,000 events.
3. **Full reindex** (``reindex --force``, lexical only) of ``--notes`` notes and of a tenth
   of them, each in a child process: seconds and peak RSS (target ≤ 400 MB at 100,000).
4. **A single-line transcript** of ``--transcript-mb`` MB: two Stop captures of one session
   through the real hook and ``drain`` (heuristic writer: no model), each drain's wall time
   and peak RSS, beside the same two captures of a 1 KB transcript in the same run.

Everything is generated under a temporary directory; nothing is read from the network.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
BIN = Path(sys.executable).parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench_recall_hook import fill  # noqa: E402
from hostile_logs import single_line_transcript, write_log, write_notes  # noqa: E402

MB = 1024 * 1024

_REFRESH = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    from reflect_jobs.reflections.background import refresh_known
    t, c = time.perf_counter(), time.process_time()
    report = refresh_known(Path(sys.argv[1]), Path(sys.argv[2]), "alpha", budget_sec=None)
    print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                      "events": report.events,
                      "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    """
)

_REINDEX = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    from reflect_jobs.index import maintenance
    t, c = time.perf_counter(), time.process_time()
    stats = maintenance.reindex(Path(sys.argv[1]), force=True, vectors=False)
    print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                      "inserted": stats.inserted,
                      "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    """
)

_CHILD_PEAK = textwrap.dedent(
    """
    import resource, subprocess, sys, time
    t = time.perf_counter()
    subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
    print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """
)


def _child(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def _medians(env: dict[str, str], payload: bytes, runs: int) -> tuple[float, float]:
    hook = [str(BIN / "reflect-jobs-hook"), "claude"]
    bare = [sys.executable, "-c", "pass"]
    b, h = [], []
    for _ in range(runs):
        b.append(_timed(bare, b"", env))
        h.append(_timed(hook, payload, env))
    return statistics.median(b), statistics.median(h)


def bench_sessionstart(tmp: Path, sizes: list[int], runs: int) -> None:
    """Sections 1 and 2: the hook beside a synced log of each size, and the worker's fold."""
    from reflect_jobs.reflections import home
    from reflect_jobs.reflections.store import open_store

    print("## SessionStart beside a synced log, and the worker's refresh of it")
    print(f"medians of {runs} runs in ms; ratio to the bare interpreter (target <= 3x)")
    for n in sizes:
        where = tmp / f"ss{n}"
        repo = where / "r1"
        (repo / ".git").mkdir(parents=True)
        (repo / ".git" / "config").write_text(
            '[remote "origin"]\n\turl = git@github.com:acme/r1.git\n'
        )
        kb = where / "kb"
        fill(kb, 1000)
        env = {
            **os.environ,
            "REFLECT_HOME": str(where / "home"),
            "GLOBAL_LEARNINGS_PATH": str(kb),
            "REFLECT_HOST": "alpha",
        }
        store = open_store(str(repo), repo, env)
        try:
            for i in range(20):
                store.add("handoff" if i % 5 == 0 else "action", f"Open item {i} of this host")
        finally:
            store.close()
        log_dir = home.memory_home(home.repo_key(repo), repo, env) / "reflections"
        size = write_log(log_dir / "beta.jsonl", n)
        payload = json.dumps({"hook_event_name": "SessionStart", "cwd": str(repo)}).encode()
        out = subprocess.run(
            [str(BIN / "reflect-jobs-hook"), "claude"], input=payload, env=env,
            capture_output=True, check=True,
        )  # fmt: skip
        told = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        bare, stale = _medians(env, payload, runs)
        fold = _child(_REFRESH, env["REFLECT_HOME"], str(kb), env=env)
        bare2, fresh = _medians(env, payload, runs)
        print(
            f"{n:>9,} events ({size / MB:.0f} MB): bare {bare:.0f}  after the sync {stale:.0f}"
            f" ({stale / bare:.2f}x, {told.count('- #')} items told)  after the refresh"
            f" {fresh:.0f} ({fresh / bare2:.2f}x)"
        )
        print(
            f"{'':>9}  worker refresh: {fold['events']:,} events in {fold['wall']:.0f} s wall,"
            f" {fold['cpu']:.0f} s CPU, peak RSS {fold['peak_kib'] / 1024:.0f} MB"
            " (target <= 200 MB at 1,000,000)"
        )


def bench_reindex(tmp: Path, notes: int) -> None:
    """Section 3: a forced lexical reindex of a tenth of the notes and of all of them."""
    print("## Full reindex (--force, lexical only), child process peak RSS (target <= 400 MB)")
    for n in (notes // 10, notes):
        root = tmp / f"kb-{n}"
        t = time.perf_counter()
        write_notes(root, n)
        wrote = time.perf_counter() - t
        got = _child(_REINDEX, str(root))
        print(
            f"{n:>9,} notes (written in {wrote:.0f} s): {got['wall']:.0f} s wall,"
            f" {got['cpu']:.0f} s CPU, peak RSS {got['peak_kib'] / 1024:.0f} MB"
        )


def _capture(env: dict[str, str], path: Path, session: str) -> tuple[float, float]:
    payload = {"session_id": session, "transcript_path": str(path), "hook_event_name": "Stop"}
    subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"], input=json.dumps(payload).encode(),
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", _CHILD_PEAK, str(BIN / "reflect-jobs"), "drain",
         "--until-idle", "--max-seconds", "900"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall, peak = out.stdout.split()
    return float(wall), int(peak) / 1024


def bench_transcript(tmp: Path, mb: int) -> None:
    """Section 4: two Stop captures of a single-line transcript, and of a 1 KB one."""
    print(f"## A {mb} MB single-line transcript: two Stop captures (hook + drain)")
    env = {
        **os.environ,
        "REFLECT_HOME": str(tmp / "t-home"),
        "GLOBAL_LEARNINGS_PATH": str(tmp / "t-kb"),
        "REFLECT_WRITER_BACKEND": "heuristic",
        "REFLECT_CAPTURE_SETTLE_SEC": "0",
        "REFLECT_INDEX_VECTORS": "0",
    }
    rows = []
    for name, chars in (("1 KB", 1000), (f"{mb} MB", mb * MB)):
        path = tmp / f"t-{chars}.jsonl"
        single_line_transcript(path, chars)
        with path.open("a") as fh:
            fh.write("\n")
        first = _capture(env, path, f"s-{chars}")
        with path.open("a") as fh:  # the session goes on: one more (small) record
            fh.write(json.dumps({"type": "user", "message": {"role": "user", "content": "ok"}}))
            fh.write("\n")
        second = _capture(env, path, f"s-{chars}")
        rows.append((name, first, second))
    for name, (w1, p1), (w2, p2) in rows:
        print(
            f"{name:>7}: first capture {w1:.1f} s, peak {p1:.0f} MB; second capture"
            f" {w2:.1f} s, peak {p2:.0f} MB (drain wall time and peak RSS)"
        )


def main() -> None:
    """Run the sections asked for and print their figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", default="100000,1000000")
    ap.add_argument("--notes", type=int, default=100_000)
    ap.add_argument("--transcript-mb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--only", default="sessionstart,reindex,transcript")
    args = ap.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        if "sessionstart" in only:
            sizes = [int(x) for x in args.events.split(",") if x]
            bench_sessionstart(Path(tmp), sizes, args.runs)
        if "reindex" in only:
            bench_reindex(Path(tmp), args.notes)
        if "transcript" in only:
            bench_transcript(Path(tmp), args.transcript_mb)


if __name__ == "__main__":
    main()
