"""Pending global learnings: ``status``'s count and ``review``'s list at thousands of notes.

Run: .venv/bin/python bench/bench_pending_global.py [--notes 5000] [--pending 50] [--runs 20]

A temporary home gets ``--notes`` learnings (half repository-scoped, ``--pending`` of those
pending globals: ``scope: repo`` + ``proposed_scope: global``), written as the add writes
them (note, sidecar, ledger row). Timed, each best of ``--runs`` and the first call:

* **pending_global_count** — what ``status`` runs (a short read session and its query);
* **with_pending** — what ``review --json`` and the dashboard's queue run (no proposed rows);
* **upgrade 0011 -> 0012** — the ledger taken back to 0011 and migrated again: the column and
  its backfill from the notes (skipped on code without migration 0012).

Works on code from before migration 0012 too (the count then took the KB path and read the
context store's flag, so the store is filled first): run it with that checkout on
``PYTHONPATH`` for the "before" figure.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

STAMP = "2025-01-01T00:00:00Z"
REPO = "github.com/acme/shop"


def build(notes: int, pending: int) -> None:
    """Write the notes and their ledger rows into the home the environment names."""
    from sqlalchemy import update

    from reflect_jobs import kb
    from reflect_jobs.config import load_settings
    from reflect_jobs.ledger import learnings
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Learning

    s = load_settings()
    ids = []
    with session_scope(s.db_url) as session:
        for i in range(notes):
            scope = "repo" if i % 2 else "global"
            learning = {
                "title": f"Learning number {i} about topic {i % 97}",
                "rule": f"Rule {i}.",
                "category": "Tools",
                "scope": scope,
                "repo": REPO,
            }
            extra = {kb.PROPOSED_SCOPE: "global"} if i % 2 and i < 2 * pending else None
            note = kb.write_learning(
                s.kb_path,
                learning,
                created=STAMP,
                updated=STAMP,
                source_path=f"/t{i}.jsonl",
                session_id=f"s{i}",
                extra=extra,
            )
            if extra:
                ids.append(note.id)
            learnings.upsert_learning(
                session,
                learning_id=note.id,
                title=learning["title"],
                category="Tools",
                learning_type="gotcha",
                confidence_num=0.8,
                note_path=str(note.path),
                content_hash=note.content_hash,
                source=f"/t{i}.jsonl",
                session_id=f"s{i}",
                signal_hash=None,
                job_id=None,
                scope=kb.note_scope(learning),
                repo_key=REPO if scope == "repo" else None,
            )
        if hasattr(Learning, "proposed_scope"):  # what the add's upsert records for them
            session.execute(
                update(Learning).where(Learning.id.in_(ids)).values(proposed_scope="global")
            )


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, object]:
    """(best, first) milliseconds of ``runs`` calls, and the last answer."""
    times, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), times[0], out


def main() -> None:
    """Build the home, time the count, the list and the upgrade, print one line each."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=5000)
    ap.add_argument("--pending", type=int, default=50)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rj-pending-"))
    try:
        run(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    """The home under ``root``: build it, then the timings."""
    os.environ.update(
        REFLECT_HOME=str(root / "home"),
        GLOBAL_LEARNINGS_PATH=str(root / "kb"),
        REFLECT_INDEX_VECTORS="0",
        HF_HUB_OFFLINE="1",
    )
    from reflect_jobs.config import load_settings
    from reflect_jobs.ledger import db
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.pipeline import global_cap

    start = time.perf_counter()
    build(args.notes, args.pending)
    s = load_settings()
    old_count = len(inspect.signature(global_cap.pending_global_count).parameters) == 2
    if old_count:  # the count read the context store's flag: fill the store
        code = "from reflect_jobs.entry import main; import sys; sys.argv=['x','reindex']; main()"
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    print(
        f"{args.notes} notes, {args.pending} pending (built in {time.perf_counter() - start:.0f} s)"
    )

    def count() -> object:
        with session_scope(s.db_url, readonly=True) as session:
            if old_count:
                return global_cap.pending_global_count(session, s.kb_path)  # type: ignore[call-arg]
            return global_cap.pending_global_count(session)

    def listing() -> object:
        with session_scope(s.db_url, readonly=True) as session:
            return len(global_cap.with_pending(session, []))

    for name, fn in (("pending_global_count", count), ("with_pending", listing)):
        best, first, out = timed(fn, args.runs)
        print(f"{name:22} {out} pending  best {best:7.1f} ms  first {first:7.1f} ms")
    engine = db._make_engine(s.db_url)
    if db.migration_status(engine)[1] == "0012":
        from alembic import command

        command.downgrade(db.alembic_config(engine), "0011")
        start = time.perf_counter()
        db.upgrade(engine)
        took = (time.perf_counter() - start) * 1000
        with engine.connect() as conn:
            n = conn.exec_driver_sql(
                "SELECT count(*) FROM learnings WHERE proposed_scope = 'global'"
            ).scalar()
        print(f"upgrade 0011 -> 0012   {n} backfilled  {took:7.0f} ms")
    engine.dispose()


if __name__ == "__main__":
    main()
