"""Reflection index refresh at N items: nothing changed, one new event, a full build.

Run: .venv/bin/python bench/bench_reflections.py [--items 10000] [--runs 30]

Writes N items (plus an edit for every fifth and a done for every tenth) into two host logs
of a temporary memory home, builds the index once from nothing, then measures, in turn so a
load change on the shared machine hits every row alike:

* ``stat only`` — the baseline: scanning the log directory and stat-ing each log, the least
  any refresh must do to know nothing changed;
* ``refresh, nothing changed`` on an open index (the target is about 10 ms);
* ``open + refresh, nothing changed`` — what one CLI command pays before it answers;
* ``append 1 event + refresh`` — the event appended (one fsynced write) and read back
  incrementally, the item folded again;
* ``list open`` and ``context`` at N items, for scale;
* ``reflections context`` as a whole process (what a session start pays), against a bare
  ``python -c pass`` of the same interpreter.

Every figure is a median (and p95) in milliseconds with its ratio to the stat-only baseline.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reflect_jobs.reflections.events import append_event, make_event, new_hex  # noqa: E402
from reflect_jobs.reflections.index import ReflectionIndex  # noqa: E402
from reflect_jobs.reflections.store import Store  # noqa: E402
from reflect_jobs.repo import Repo  # noqa: E402

KEY = "example.com/bench/reflections"
KINDS = ("action", "question", "handoff", "learning", "gotcha", "note")


def write_logs(log_dir: Path, n: int) -> list[str]:
    """N items over two host logs, written in bulk (one write per file, as a sync would)."""
    log_dir.mkdir(parents=True)
    t0 = datetime.now(UTC) - timedelta(days=3)
    lines: dict[str, list[str]] = {"alpha": [], "beta": []}
    uids = []
    for i in range(n):
        host = "alpha" if i % 2 else "beta"
        uid = new_hex(host, str(i))
        uids.append(uid)
        at = t0 + timedelta(seconds=i)
        title = f"item {i}: wire the retry budget into importer {i % 97}"
        events = [
            make_event(
                "add",
                uid,
                host=host,
                by="reflector",
                now=at,
                kind=KINDS[i % 6],
                title=title,
                body=f"body of {i} with sqlite wal notes " * 3,
            )
        ]
        if i % 5 == 0:
            events.append(
                make_event(
                    "edit",
                    uid,
                    host="alpha",
                    by="person",
                    now=at + timedelta(hours=1),
                    body=f"edited {i}",
                )
            )
        if i % 10 == 0:
            events.append(
                make_event(
                    "done",
                    uid,
                    host="beta",
                    by="person",
                    now=at + timedelta(hours=2),
                    note=f"shipped in c{i:06x}",
                )
            )
        for e in events:
            lines[e["host"]].append(json.dumps(e, separators=(",", ":"), sort_keys=True))
    for host, rows in lines.items():
        (log_dir / f"{host}.jsonl").write_text("\n".join(rows) + "\n")
        os.chmod(log_dir / f"{host}.jsonl", 0o600)
    return uids


def stat_only(log_dir: Path) -> None:
    """The baseline: what any refresh must at least do."""
    with os.scandir(log_dir) as entries:
        for entry in entries:
            if entry.name.endswith(".jsonl"):
                entry.stat()


def ms(samples: list[float]) -> tuple[float, float]:
    """Median and p95 of seconds, in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered) * 1e3, p95 * 1e3


def main() -> None:
    """Build, measure in turn, print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "kb" / "repos" / KEY
        log_dir = home / "reflections"
        t = time.perf_counter()
        uids = write_logs(log_dir, args.items)
        gen = time.perf_counter() - t
        db = Path(tmp) / "state" / "reflections-index.db"
        index = ReflectionIndex(db)
        t = time.perf_counter()
        stats = index.refresh(KEY, log_dir)
        build = time.perf_counter() - t
        size = sum(p.stat().st_size for p in log_dir.iterdir())
        print(
            f"{args.items} items, {stats.events} events, logs {size / 1e6:.1f} MB "
            f"(generated in {gen:.1f} s)"
        )
        print(f"full build from nothing: {build * 1e3:.0f} ms")
        store = Store(Repo(KEY, None, home), "alpha", index)

        def refresh_unchanged() -> None:
            assert not index.refresh(KEY, log_dir).changed

        def open_refresh() -> None:
            other = ReflectionIndex(db)
            try:
                assert not other.refresh(KEY, log_dir).changed
            finally:
                other.close()

        counter = iter(range(10**9))

        def one_event() -> None:
            uid = uids[next(counter) % len(uids)]
            append_event(
                log_dir / "alpha.jsonl",
                make_event("edit", uid, host="alpha", by="person", body="touched"),
            )
            t = time.perf_counter()
            got = index.refresh(KEY, log_dir)
            samples["refresh after 1 new event"].append(time.perf_counter() - t)
            assert got.events == 1 and got.items == 1, got

        rows = {
            "stat only (baseline)": lambda: stat_only(log_dir),
            "refresh, nothing changed": refresh_unchanged,
            "open + refresh, nothing changed": open_refresh,
            "append 1 event + refresh": one_event,
            "list open": lambda: store.items("open"),
            "context": lambda: store.context(),
        }
        samples: dict[str, list[float]] = {name: [] for name in rows}
        samples["refresh after 1 new event"] = []
        for _ in range(args.runs):
            for name, fn in rows.items():
                t = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - t)
        env = {
            **os.environ,
            "REFLECT_HOME": str(db.parent),
            "GLOBAL_LEARNINGS_PATH": str(Path(tmp) / "kb"),
        }
        procs: dict[str, list[float]] = {"python -c pass": [], "reflections context (process)": []}
        for _ in range(max(3, args.runs // 6)):
            for name, argv in (
                ("python -c pass", [sys.executable, "-c", "pass"]),
                (
                    "reflections context (process)",
                    [str(Path(sys.executable).parent / "reflections"), "context", "--repo", KEY],
                ),
            ):
                t = time.perf_counter()
                subprocess.run(argv, env=env, check=True, capture_output=True)
                procs[name].append(time.perf_counter() - t)
        base, _ = ms(samples["stat only (baseline)"])
        print(f"{'measure':38} {'median ms':>10} {'p95 ms':>8} {'x stat-only':>12}")
        for name, values in samples.items():
            med, p95 = ms(values)
            print(f"{name:38} {med:10.3f} {p95:8.3f} {med / base:12.1f}")
        pbase, _ = ms(procs["python -c pass"])
        for name, values in procs.items():
            med, p95 = ms(values)
            print(f"{name:38} {med:10.3f} {p95:8.3f} {med / pbase:9.1f} x python -c pass")
        index.close()


if __name__ == "__main__":
    main()
