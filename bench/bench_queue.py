"""$0 job throughput: capture → prepare → done (gate skip) against plain Huey, same run.

Run: .venv/bin/python bench/bench_queue.py [--jobs N] [--workers 1,2,4] [--redis-pg]
     [--redis-url redis://127.0.0.1:6379/0]

Enqueues N captures of no-signal transcripts (distinct sessions) with the hook's fast path,
then times `reflect-jobs drain --until-idle` (process start included, reported separately
from the drain's own measured seconds). The baseline, right after each run: the same number
of no-op tasks through a bare Huey consumer with the same worker count on the same kind of
storage. Prints jobs/s, the ratio ours / plain Huey, our overhead per job, and the ratio of
each worker count to one worker. With --redis-pg the runs use Redis for the queue and a
fresh PostgreSQL database for the ledger (127.0.0.1, trust auth; dropped afterwards).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from reflect_jobs import fastqueue  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"


@contextlib.contextmanager
def pg_db() -> Iterator[str]:
    """A fresh PostgreSQL database for one run, dropped afterwards."""
    import psycopg

    name = "rj_bench_" + uuid.uuid4().hex[:8]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def run(n: int, workers: int, redis_url: str | None) -> tuple[float, float]:
    """Drain ``n`` $0 captures; return (wall seconds incl. process start, drain seconds)."""
    with contextlib.ExitStack() as stack:
        db_url = stack.enter_context(pg_db()) if redis_url else None
        return _run(n, workers, redis_url, db_url)


def _run(n: int, workers: int, redis_url: str | None, db_url: str | None) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "REFLECT_HOME": f"{tmp}/home",
            "GLOBAL_LEARNINGS_PATH": f"{tmp}/kb",
            "REFLECT_CAPTURE_SETTLE_SEC": "0",
            "REFLECT_INDEX_VECTORS": "0",
            "REFLECT_WRITER_BACKEND": "heuristic",
        }
        if redis_url and db_url:
            env["REFLECT_QUEUE_URL"] = redis_url
            env["REFLECT_DB_URL"] = db_url
        src = ROOT / "samples" / "hello-world-script.jsonl"  # no signal: a $0 skip
        paths = []
        for i in range(n):
            p = Path(tmp) / f"t{i}.jsonl"
            p.write_bytes(src.read_bytes() + f'{{"type":"summary","summary":"{i}"}}\n'.encode())
            paths.append(p)
        subprocess.run(
            [str(BIN / "reflect-jobs"), "db", "upgrade"], env=env, check=True, capture_output=True
        )
        if redis_url:
            import redis

            redis.Redis.from_url(redis_url).delete("huey.redis.reflect", "huey.schedule.reflect")
        for i, p in enumerate(paths):
            fastqueue.enqueue(
                env.get("REFLECT_QUEUE_URL") or f"sqlite:///{tmp}/home/queue.db",
                "reflect_jobs.tasks.capture",
                ("claude", f"s{i}", str(p), "Stop", time.time()),
            )
        t0 = time.perf_counter()
        out = subprocess.run(
            [
                str(BIN / "reflect-jobs"),
                "drain",
                "--until-idle",
                "--json",
                "-w",
                str(workers),
                "--max-seconds",
                "600",
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        summary = json.loads(out.stdout)
        assert summary["counts"].get("done") == n, summary
        return wall, summary["seconds"]


def plain_huey(n: int, workers: int, redis_url: str | None) -> float:
    """Baseline: the same number of no-op tasks through a bare Huey consumer (jobs/s).

    As fast as Huey allows and never slower-configured than ours: the SQLite storage takes
    the options :func:`reflect_jobs.queue.make_huey` gives ours (``fsync=False``: no fsync
    per write; Huey's default keeps SQLite's FULL synchronous mode, which an earlier
    baseline used), the consumer polls at least as often as our drain's, and the clock stops
    when the last task has *run* (a counter), not when the queue looks empty (a task still
    executing was counted as done).
    """
    import threading

    from huey import RedisHuey, SqliteHuey

    with tempfile.TemporaryDirectory() as tmp:
        if redis_url:
            huey = RedisHuey("rjbaseline", url=redis_url, results=False, utc=True)
            huey.flush()
        else:
            huey = SqliteHuey(
                "rjbaseline",
                filename=f"{tmp}/q.db",
                results=False,
                utc=True,
                timeout=30,
                fsync=False,
            )
        done = [0]
        lock = threading.Lock()
        finished = threading.Event()

        @huey.task()
        def noop(i: int) -> None:
            with lock:
                done[0] += 1
                if done[0] == n:
                    finished.set()

        for i in range(n):
            noop(i)
        consumer = huey.create_consumer(
            workers=workers,
            worker_type="thread",
            periodic=False,
            initial_delay=0.01,
            max_delay=0.1,
            check_worker_health=False,
        )
        t0 = time.perf_counter()
        consumer.start()
        finished.wait(600)
        elapsed = time.perf_counter() - t0
        consumer.stop(graceful=True)
        return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--redis-pg", action="store_true")
    ap.add_argument("--redis-url", default=REDIS_URL)
    args = ap.parse_args()
    store = "Redis + PostgreSQL" if args.redis_pg else "SQLite + SQLite"
    redis_url = args.redis_url if args.redis_pg else None
    flag = " --redis-pg" if args.redis_pg else ""
    if args.redis_pg and args.redis_url != REDIS_URL:
        flag += f" --redis-url {args.redis_url}"
    print(f"$ .venv/bin/python bench/bench_queue.py --jobs {args.jobs}{flag}\n")
    print(f"$0 jobs (capture→prepare→done), {args.jobs} jobs, {store}")
    print(
        "| workers | ours jobs/s (drain) | incl. process start | plain Huey no-op tasks/s |"
        " ours / plain Huey | our overhead per job | ours vs 1 worker |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    first = 0.0
    for w in (int(x) for x in args.workers.split(",")):
        wall, inner = run(args.jobs, w, redis_url)
        base = plain_huey(args.jobs, w, redis_url)
        rate = args.jobs / inner
        first = first or rate
        overhead_ms = (inner / args.jobs - 1 / base) * 1000
        print(
            f"| {w} | {rate:.1f} | {args.jobs / wall:.1f} | {base:,.0f} | {rate / base:.3f}x |"
            f" {overhead_ms:.1f} ms | {rate / first:.2f}x |"
        )


if __name__ == "__main__":
    main()
