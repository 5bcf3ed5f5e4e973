"""What one $0 job costs in process, against a Huey no-op task on the same storage.

Run: .venv/bin/python bench/bench_zero_job.py [--jobs 300] [--reps 5] [--history N]
     [--event SessionEnd|Stop] [--profile] [--ledger-parts]

A $0 job is a capture of a transcript with no learning signal: the ``capture`` task records
the job and enqueues ``prepare``, which claims it, asks the free gates, finds no signal and
finishes it ``done/skip_no_signal``. ``bench_queue.py`` times that through a ``drain``
process (its consumer polls); this script takes the queue's polling out and the ledger's
cost in: N captures (samples/hello-world-script.jsonl, a distinct summary line per copy, so
each is a new session) are enqueued with the hook's fast path (``fastqueue``) and run by
``huey.dequeue()`` / ``huey.execute()`` in a loop in this process, in a temporary
``REFLECT_HOME`` migrated with ``reflect-jobs db upgrade``.

The baseline is N Huey no-op tasks dequeued and executed the same way on a ``SqliteHuey``
with our storage options (``fsync=False``, ``utc=True``, no results) and Huey's own logging
as a bare Huey has it (nothing below WARNING; ours writes Huey's INFO lines to drain.log). The two alternate,
rep by rep (the machine is shared); the medians are printed with their ratio. A $0 job is
two tasks (capture, prepare); the baseline is one no-op task per job.

Ledger transactions and commits are counted with SQLAlchemy event listeners (``begin``,
``commit``) on the ledger's engine, statements with ``before_cursor_execute``; they are the
same in every rep. ``--history N`` puts N finished jobs of other sessions in the ledger first
(a ledger in use is not empty: a query that scans ``jobs`` grows with it). ``--event Stop``
makes each capture a Stop below the first checkpoint (``skip_below_checkpoint``, the
transcript's end read but no cascade). ``--profile`` prints a cProfile of one more rep.
``--ledger-parts`` also times the ledger's side alone: the calls a $0 job makes through the
ledger gateway (capture, the claim and prepare's claim-time reads, the verdict), each part
in CPU microseconds over ``--jobs`` × 3 rounds, without the transcript, gates or queue.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "samples" / "hello-world-script.jsonl"  # no signal: a $0 skip


def setup_env(tmp: str) -> dict[str, str]:
    """Point this process (and the migration's child) at a fresh home, before any import."""
    env = {
        "REFLECT_HOME": f"{tmp}/home",
        "GLOBAL_LEARNINGS_PATH": f"{tmp}/kb",
        "REFLECT_CAPTURE_SETTLE_SEC": "0",
        "REFLECT_INDEX_VECTORS": "0",
        "REFLECT_WRITER_BACKEND": "heuristic",
    }
    os.environ.update(env)
    for name in ("REFLECT_QUEUE_URL", "REFLECT_DB_URL", "REFLECT_DISABLED"):
        os.environ.pop(name, None)
    child = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(
        [sys.executable, "-m", "reflect_jobs.cli", "db", "upgrade"],
        env=child,
        check=True,
        capture_output=True,
    )
    return env


class Timing:
    """Wall and CPU milliseconds per job of one timed block (CPU: this process only, so a
    loaded machine's waits for a core do not count; SQLite runs in this process)."""

    def __init__(self, n: int, profile: Any = None) -> None:
        self.n, self.profile = n, profile
        self.wall_ms = self.cpu_ms = 0.0

    def __enter__(self) -> Timing:
        if self.profile is not None:
            self.profile.enable()
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_ms = (time.perf_counter() - self._wall) / self.n * 1000
        self.cpu_ms = (time.process_time() - self._cpu) / self.n * 1000
        if self.profile is not None:
            self.profile.disable()


class Ours:
    """N $0 captures through our tasks, counted on the ledger's engine."""

    def __init__(self, tmp: str, event: str) -> None:
        from sqlalchemy import event as sa_event

        from reflect_jobs import tasks
        from reflect_jobs.ledger.db import get_engine

        self.tasks = tasks
        self.tmp = Path(tmp)
        self.event = event
        #: SessionEnd asks for a deep pass: the cascade reads the transcript and finds no
        #: signal. A Stop far below the first checkpoint ends at the checkpoint gate.
        self.expect = (
            "done/skip_no_signal" if event == "SessionEnd" else "done/skip_below_checkpoint"
        )
        self.seq = 0
        self.counts: Counter[str] = Counter()
        engine = get_engine(tasks.settings.db_url)
        for name in ("begin", "commit", "rollback"):
            sa_event.listen(engine, name, self._counter(name))
        sa_event.listen(engine, "before_cursor_execute", self._counter("statements"))

    def add_history(self, n: int) -> None:
        """``n`` finished jobs of other sessions in the ledger first: a ledger in use has a
        history, and a query that scans ``jobs`` costs more the longer it is."""
        from reflect_jobs.ledger.db import session_scope
        from reflect_jobs.ledger.models import Job, JobEvent, utcnow

        now = utcnow()
        with session_scope(self.tasks.settings.db_url) as s:
            for i in range(n):
                jid = f"jhist{i:011d}"
                s.add(
                    Job(
                        id=jid,
                        harness="claude",
                        session_id=f"history-{i}",
                        transcript_path=f"/history/{i}.jsonl",
                        event="Stop",
                        stage="done",
                        state="done",
                        outcome="skip_below_checkpoint",
                        accepting=False,
                        created_at=now,
                        updated_at=now,
                        finished_at=now,
                    )
                )
                s.add(JobEvent(job_id=jid, at=now, to_stage="done", to_state="done"))

    def _counter(self, name: str) -> Any:
        def count(*_args: object, **_kw: object) -> None:
            self.counts[name] += 1

        return count

    def enqueue(self, n: int) -> list[str]:
        """Write ``n`` fresh no-signal transcripts and enqueue their captures."""
        from reflect_jobs import fastqueue

        sessions = []
        body = SAMPLE.read_bytes()
        for _ in range(n):
            i = self.seq
            self.seq += 1
            path = self.tmp / f"t{i}.jsonl"
            path.write_bytes(body + f'{{"type":"summary","summary":"{i}"}}\n'.encode())
            fastqueue.enqueue(
                self.tasks.settings.queue_url,
                "reflect_jobs.tasks.capture",
                ("claude", f"s{i}", str(path), self.event, time.time()),
            )
            sessions.append(f"s{i}")
        return sessions

    def run(self, n: int, profile: Any = None) -> tuple[Timing, Counter[str]]:
        """Run ``n`` $0 jobs (the enqueue is not timed); their timing and what the ledger saw."""
        sessions = self.enqueue(n)
        huey = self.tasks.huey
        before = Counter(self.counts)
        executed = 0
        with Timing(n, profile) as timing:
            while (task := huey.dequeue()) is not None:
                huey.execute(task)
                executed += 1
        seen = Counter(self.counts)
        seen.subtract(before)
        seen["tasks"] = executed
        self.check(sessions)
        return timing, seen

    def check(self, sessions: list[str]) -> None:
        """Every job of the rep ended ``done/skip_no_signal`` (a bench that measures a
        failure measures nothing)."""
        from sqlalchemy import select

        from reflect_jobs.ledger.db import session_scope
        from reflect_jobs.ledger.models import Job

        with session_scope(self.tasks.settings.db_url, readonly=True) as s:
            rows = s.execute(
                select(Job.state, Job.outcome).where(Job.session_id.in_(sessions))
            ).all()
        got = Counter(f"{r.state}/{r.outcome}" for r in rows)
        assert got == Counter({self.expect: len(sessions)}), got


class PlainHuey:
    """N no-op tasks through a SqliteHuey with our storage options, same loop."""

    def __init__(self, tmp: str) -> None:
        from huey import SqliteHuey

        self.huey = SqliteHuey(
            "rjbaseline",
            filename=f"{tmp}/baseline.db",
            results=False,
            utc=True,
            timeout=30,
            fsync=False,
        )
        self.done = 0

        @self.huey.task()  # type: ignore[untyped-decorator]
        def noop(i: int) -> None:
            self.done += 1

        self.noop = noop

    def run(self, n: int) -> Timing:
        """Run ``n`` no-op tasks (the enqueue is not timed)."""
        for i in range(n):
            self.noop(i)
        start = self.done
        # A bare Huey logs nothing at INFO (no handler, the root logger at WARNING); ours
        # sends Huey's "Executing …" lines to drain.log, which the baseline must not pay.
        huey_log = logging.getLogger("huey")
        level = huey_log.level
        huey_log.setLevel(logging.WARNING)
        try:
            with Timing(n) as timing:
                while (task := self.huey.dequeue()) is not None:
                    self.huey.execute(task)
        finally:
            huey_log.setLevel(level)
        assert self.done - start == n
        return timing


def ledger_parts(url: str, n: int) -> dict[str, float]:
    """CPU microseconds per job of each ledger part of a $0 job, the calls the stages make."""
    from reflect_jobs.checkpoints import PassPlan
    from reflect_jobs.ledger import captures, checkpoints, costs, gateway, watermarks

    parts: Counter[str] = Counter()

    def timed(name: str, t0: float) -> float:
        now = time.process_time()
        parts[name] += now - t0
        return now

    plan = PassPlan(False, "deep", None, 1.0, "", 0, "bench")

    def one(i: int) -> None:
        t = tx = time.process_time()
        with gateway.transaction(url) as conn:
            res = captures.record_capture(
                conn, harness="claude", session_id=f"lp{i}", transcript_path=f"/lp/{i}",
                event="SessionEnd", size=1, mtime=1.0, settle_sec=0,
            )  # fmt: skip
        tx = timed("capture transaction (insert, event, commit)", tx)
        with gateway.transaction(url) as conn:
            t = time.process_time()
            job = gateway.claim(conn, res.job_id, "prepare", worker="bench", lease_sec=60)
            assert job is not None
            t = timed("  claim: compare-and-set + its event", t)
            checkpoints.running_pass(conn, job)
            captures.last_transcript(conn, job.transcript_path)
            watermarks.current(conn, job.harness, job.session_id, job.transcript_path)
            checkpoints.state(conn, job.harness, job.session_id, job.transcript_path)
            t = timed("  claim: prepare's four reads", t)
            job.accepting = False
            gateway.save(conn, job)
            timed("  claim: accepting = false", t)
        tx = timed("claim transaction (with BEGIN IMMEDIATE, commit)", tx)
        with gateway.transaction(url) as conn:
            t = time.process_time()
            held = gateway.load(conn, res.job_id)
            assert held is not None
            t = timed("  verdict: the job", t)
            checkpoints.record(
                conn, harness="claude", session_id=held.session_id,
                transcript_path=held.transcript_path, plan=plan, idle_sec=600,
            )  # fmt: skip
            costs.record_free(conn, held, "skip_no_signal")
            t = timed("  verdict: checkpoint upsert + cost row", t)
            held.prepare_stats = {"signal_count": 0}
            gateway.transition(
                conn, held, to_state="done", to_stage="done", outcome="skip_no_signal"
            )
            t = timed("  verdict: the move + its event", t)
            captures.remember_transcript(conn, held)
            timed("  verdict: transcript upsert", t)
        timed("verdict transaction (with commit)", tx)

    for i in range(-50, 0):
        one(i)  # warm
    parts.clear()
    for i in range(n * 3):
        one(i)
    return {name: secs / (n * 3) * 1e6 for name, secs in parts.items()}


def loadavg() -> str:
    """The 1-minute load average (the machine is shared)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--event", default="SessionEnd", choices=("SessionEnd", "Stop"))
    ap.add_argument("--history", type=int, default=0, help="finished jobs in the ledger first")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--ledger-parts", action="store_true", help="time the ledger's side alone")
    ap.add_argument("--sort", default="cumulative")
    ap.add_argument("--top", type=int, default=45)
    args = ap.parse_args()
    n = args.jobs
    with tempfile.TemporaryDirectory() as tmp:
        setup_env(tmp)
        ours, plain = Ours(tmp, args.event), PlainHuey(tmp)
        ours.add_history(args.history)
        ours.run(args.warmup)  # runtime built, modules imported, caches warm
        plain.run(args.warmup)
        load0 = loadavg()
        ours_t: list[Timing] = []
        plain_t: list[Timing] = []
        seen: Counter[str] = Counter()
        for rep in range(args.reps):
            # a b, b a, a b…: neither side always runs right after the other
            for side in ("ours", "plain") if rep % 2 == 0 else ("plain", "ours"):
                if side == "ours":
                    timing, seen = ours.run(n)
                    ours_t.append(timing)
                else:
                    plain_t.append(plain.run(n))
        load1 = loadavg()
        print(
            f"$ .venv/bin/python bench/bench_zero_job.py --jobs {n} --reps {args.reps}"
            + (f" --event {args.event}" if args.event != "SessionEnd" else "")
            + (f" --history {args.history}" if args.history else "")
            + f"\n\n$0 jobs (capture → prepare → {ours.expect}), {n} per rep, {args.reps} reps"
            f" alternated, SQLite + SQLite, in process (dequeue/execute loop), {args.history:,}"
            f" finished jobs in the ledger before the first; load {load0} → {load1}\n"
        )
        print(
            "| | wall ms per job (median) | min–max | jobs/s | CPU ms per job (median)"
            " | ours / Huey no-op (wall) | (CPU) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        ow, pw = med(ours_t, "wall_ms"), med(plain_t, "wall_ms")
        oc, pc = med(ours_t, "cpu_ms"), med(plain_t, "cpu_ms")
        for name, ts, w, c in (
            ("ours: a $0 job (capture + prepare)", ours_t, ow, oc),
            ("Huey no-op task, same storage options", plain_t, pw, pc),
        ):
            lo, hi = min(t.wall_ms for t in ts), max(t.wall_ms for t in ts)
            print(
                f"| {name} | {w:.3f} | {lo:.3f}–{hi:.3f} | {1000 / w:,.0f} | {c:.3f}"
                f" | {w / pw:.1f}× | {c / pc:.1f}× |"
            )
        print(
            "\nper $0 job: "
            + ", ".join(
                f"{k} {seen[k] / n:.1f}"
                for k in ("tasks", "begin", "commit", "rollback", "statements")
            )
            + " (ledger transactions = begin; statements = SQL sent to the ledger)"
        )
        if args.ledger_parts:
            parts = ledger_parts(ours.tasks.settings.db_url, n)
            total = sum(v for k, v in parts.items() if not k.startswith(" "))
            print(f"\nthe ledger's side alone, CPU µs per job (total {total:,.0f}):")
            for name, us in parts.items():
                print(f"  {name:52s} {us:7,.0f}")
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            ours.run(n, prof)
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)


def med(timings: list[Timing], field: str) -> float:
    """The median of one field over the reps."""
    return float(statistics.median(float(getattr(t, field)) for t in timings))


if __name__ == "__main__":
    main()
