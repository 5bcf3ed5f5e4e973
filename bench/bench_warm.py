"""Warm search and the light worker (issue items 6 and 7): CLI times and worker RSS.

Run: .venv/bin/python bench/bench_warm.py [--notes 1000] [--repeat 3] [--idle 15]

All figures come from this run, as ratios against same-run baselines:

* CLI ``reflect-jobs search`` (hybrid and lexical) and a no-op ``reflect-jobs reindex``,
  each timed as a whole process, first with no worker up (in-process search, the
  baseline), then with ``reflect-jobs worker`` up (hybrid answered through
  ``$REFLECT_HOME/run/model.sock``); the target is hybrid-with-worker ≤ 2.5× lexical;
* the worker's RSS (the consumer plus every descendant, from ``/proc``): idle after start,
  while its model child serves searches, the peak during a reindex of one new note, and
  after ``REFLECT_MODEL_IDLE_SEC`` (target ≤ 200 MB).

The KB is the natural corpus of ``bench/corpus.py`` (``bench/data/notes.jsonl`` and its
variations). Building its vector index takes minutes at 1,000 notes, so it is built once
into ``bench/out/warm-kb-<n>`` (git-ignored) and copied for each run: the default run, with
the KB cached, stays under about three minutes. ``--rebuild`` builds it again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import corpus  # noqa: E402

from reflect_jobs import kb  # noqa: E402

BIN = Path(sys.executable).parent
CLI = str(BIN / "reflect-jobs")
NOW = "2026-11-30T00:00:00Z"
QUERY = "database is locked when two threads share one sqlite connection"


def write(path: Path, note: dict) -> str:
    """Write one corpus note into the KB at ``path``; return its note id."""
    return kb.write_learning(
        path, corpus.learning(note), created=NOW, updated=NOW, source_path="bench", session_id="b"
    ).id


def base_env(home: Path, kb_path: Path, idle: int) -> dict[str, str]:
    """The environment of one isolated installation with vectors on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLECT_", "GLOBAL_"))}
    env.update(
        REFLECT_HOME=str(home),
        GLOBAL_LEARNINGS_PATH=str(kb_path),
        REFLECT_INDEX_VECTORS="1",
        REFLECT_MODEL_IDLE_SEC=str(idle),
        REFLECT_WRITER_BACKEND="heuristic",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def cached_kb(n: int, rebuild: bool) -> Path:
    """The n-note KB with its indexes built, from the cache or built now (and timed)."""
    cache = ROOT / "bench" / "out" / f"warm-kb-{n}"
    if rebuild:
        shutil.rmtree(cache, ignore_errors=True)
    if (cache / "done").exists():
        return cache
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    for note in corpus.corpus(n):
        write(cache, note)
    home = Path(tempfile.mkdtemp(prefix="rjwarm-home"))
    t0 = time.perf_counter()
    subprocess.run(
        [CLI, "reindex", "--force", "--json"],
        env=base_env(home, cache, 600),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"(built the {n}-note KB index once, cached: {time.perf_counter() - t0:.0f} s)")
    shutil.rmtree(home, ignore_errors=True)
    (cache / "done").write_text("ok\n")
    return cache


def timed_cli(env: dict[str, str], *args: str) -> float:
    """Seconds one ``reflect-jobs`` process takes from start to exit."""
    t0 = time.perf_counter()
    subprocess.run(
        [CLI, *args], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def timed_cli_rss(env: dict[str, str], *args: str) -> tuple[float, float]:
    """Seconds and peak RSS (MB, from ``wait4``) of one ``reflect-jobs`` process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [CLI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"reflect-jobs {args} exited {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def owe_graph(kb_path: Path) -> None:
    """Make the next reindex open the graph index with nothing to change: the old no-op path.

    Before the no-op check a pass opened the graph/vector index (torch, nano-graphrag, the
    graph file) on every reindex, changed or not. The check skips it when nothing changed
    and nothing is owed, so this records a debt that changes nothing — the removal of an id
    no note has — which sends the next pass through ``_update_graph`` exactly as the old
    path did. (An earlier version deleted a ``graph_done_gen`` key no code reads any more,
    so its "old path" was the new one.)
    """
    import json
    import sqlite3

    conn = sqlite3.connect(kb_path / "index" / "files.db")
    with conn:
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('graph_owed', ?)",
            (json.dumps({"force": False, "paths": [], "drop": ["lrn-bench-no-such-note"]}),),
        )
    conn.close()


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc)."""
    parents: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{d}/stat").read_text()
                parents[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [pid], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        frontier += kids
    return out


def rss_mb(pid: int) -> tuple[float, int]:
    """Total RSS in MB of ``pid`` and its descendants, and how many processes that is."""
    total, n = 0, 0
    for p in descendants(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    n += 1
    return total / 1024, n


@contextlib.contextmanager
def worker(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """``reflect-jobs worker`` (it execs huey_consumer), up until its socket answers."""
    proc = subprocess.Popen(
        [CLI, "worker", "-w", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    sock = Path(env["REFLECT_HOME"]) / "run" / "model.sock"
    try:
        deadline = time.monotonic() + 60
        while not (sock.exists() and _listening(sock)):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the worker's socket never came up")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _listening(sock: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(sock))
            return True
        except OSError:
            return False


def via_counts(home: Path) -> dict[str, int]:
    """How many CLI searches each path answered, from drain.log's ``search_answered``."""
    counts: dict[str, int] = {}
    log = home / "drain.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if rec.get("event") == "search_answered":
                counts[rec["via"]] = counts.get(rec["via"], 0) + 1
    return counts


def sample_peak(pid: int, stop: threading.Event, out: list[float]) -> None:
    """Sample the worker tree's RSS every 0.2 s until ``stop``; append the peak."""
    peak = 0.0
    while not stop.is_set():
        peak = max(peak, rss_mb(pid)[0])
        stop.wait(0.2)
    out.append(peak)


def med(xs: list[float]) -> float:
    """Median."""
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--idle", type=int, default=15, help="REFLECT_MODEL_IDLE_SEC for the run")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    print(f"$ .venv/bin/python bench/bench_warm.py --notes {args.notes} --repeat {args.repeat}")
    cache = cached_kb(args.notes, args.rebuild)
    tmp = Path(tempfile.mkdtemp(prefix="rjwarm"))
    try:
        kb_path, home = tmp / "kb", tmp / "home"
        shutil.copytree(cache, kb_path)
        env = base_env(home, kb_path, args.idle)
        r = args.repeat
        hyb = ["search", QUERY, "--json"]
        lex = ["search", QUERY, "--mode", "lexical", "--json"]
        noop = ["reindex", "--json"]
        timed_cli(env, *noop)  # settle the manifest for this copy (paths differ)
        owe_graph(kb_path)
        old_noop = timed_cli_rss(env, *noop)  # opens the graph index: the old no-op path
        new_noop = timed_cli_rss(env, *noop)
        # Both paths checked, not assumed: the old one updates the graph, the new one not.
        owe_graph(kb_path)
        paths = [
            json.loads(
                subprocess.run([CLI, *noop], env=env, check=True, capture_output=True).stdout
            )
            for _ in range(2)
        ]
        assert [p["graph"] for p in paths] == ["updated", "unchanged"], paths
        cold = {
            "lexical": med([timed_cli(env, *lex) for _ in range(r)]),
            "hybrid": med([timed_cli(env, *hyb) for _ in range(r)]),
            "noop": med([timed_cli(env, *noop) for _ in range(r)]),
        }
        with worker(env) as proc:
            time.sleep(2)
            idle_start = rss_mb(proc.pid)
            first = timed_cli(env, *hyb)  # the model child starts here
            warm = {
                "lexical": med([timed_cli(env, *lex) for _ in range(r)]),
                "hybrid": med([timed_cli(env, *hyb) for _ in range(r)]),
                "noop": med([timed_cli(env, *noop) for _ in range(r)]),
            }
            serving = rss_mb(proc.pid)
            # A reindex through the queue, as a committed add triggers it: one new note.
            extra = corpus.extra_notes(1)[0]
            write(kb_path, extra)
            stop, peak = threading.Event(), []
            sampler = threading.Thread(target=sample_peak, args=(proc.pid, stop, peak))
            sampler.start()
            t0 = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from reflect_jobs import tasks\ntasks.HueyDispatcher().kb_changed()",
                ],
                env=env,
                check=True,
            )
            from reflect_jobs.index import maintenance

            while maintenance.index_lags(kb_path):
                time.sleep(0.2)
            # The manifest is written before the graph: wait for the graph's verdict too.
            m = maintenance.manifest(kb_path)
            try:
                while m.graph_owed() is not None and time.perf_counter() - t0 < 300:
                    time.sleep(0.2)
            finally:
                m.close()
            reindex_s = time.perf_counter() - t0
            stop.set()
            sampler.join()
            after_reindex = rss_mb(proc.pid)
            t_idle = time.perf_counter()
            while rss_mb(proc.pid)[1] > 1 and time.perf_counter() - t_idle < args.idle + 120:
                time.sleep(0.5)
            waited = time.perf_counter() - t_idle
            after_idle = rss_mb(proc.pid)
            vias = via_counts(home)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nKB: {args.notes} notes (bench/corpus.py), medians of {r} CLI runs each")
    print("\n| CLI command | no worker | worker up | worker / no worker |")
    print("|---|---:|---:|---:|")
    for key, label in (
        ("lexical", "search --mode lexical"),
        ("hybrid", "search (hybrid)"),
        ("noop", "reindex (no change)"),
    ):
        print(f"| {label} | {cold[key]:.2f} s | {warm[key]:.2f} s | {warm[key] / cold[key]:.2f}x |")
    print(
        f"\nno-op reindex, one process: {new_noop[0]:.2f} s, peak RSS {new_noop[1]:.0f} MB;"
        f" the old path (graph index opened on every pass): {old_noop[0]:.2f} s,"
        f" {old_noop[1]:.0f} MB ({old_noop[0] / new_noop[0]:.1f}x the time)"
    )
    print(f"first hybrid search after the worker started (model child cold): {first:.2f} s")
    print(
        f"hybrid / lexical: no worker {cold['hybrid'] / cold['lexical']:.2f}x,"
        f" worker up {warm['hybrid'] / warm['lexical']:.2f}x (target <= 2.5x)"
    )
    print(f"searches answered per path (drain.log): {vias}")
    print("\n| worker (consumer + children) | RSS | processes |")
    print("|---|---:|---:|")
    print(f"| idle after start | {idle_start[0]:.0f} MB | {idle_start[1]} |")
    print(f"| model child serving searches | {serving[0]:.0f} MB | {serving[1]} |")
    print(f"| peak during the reindex of one new note ({reindex_s:.1f} s) | {peak[0]:.0f} MB | - |")
    print(f"| right after that reindex | {after_reindex[0]:.0f} MB | {after_reindex[1]} |")
    print(
        f"| after REFLECT_MODEL_IDLE_SEC={args.idle} (child gone {waited:.0f} s later)"
        f" | {after_idle[0]:.0f} MB | {after_idle[1]} |"
    )


if __name__ == "__main__":
    main()
