"""What used to be written and never read: old chunk hashes and heartbeats are pruned by
recovery, and the hook's timestamp becomes the capture's logged queue delay."""

from __future__ import annotations

import json
import math
import subprocess
from datetime import timedelta

from sqlalchemy import select
from support import BIN, transcripts_dir

from reflect_jobs.ledger import control, learnings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import ChunkHash, Heartbeat, utcnow
from reflect_jobs.ledger.view import LedgerView
from reflect_jobs.pipeline.capture import queue_delay


def _seed(db: str) -> None:
    now = utcnow()
    with session_scope(db) as s:
        for name, age in (("old", 31), ("fresh", 1)):
            s.add(
                ChunkHash(hash=name, transcript_path="t", job_id=None, created_at=now - age_d(age))
            )
        for name, age in (("gone:1", 8), ("recent:2", 2), ("alive:3", 0)):
            s.add(Heartbeat(worker=name, host="h", pid=1, started_at=now, beat_at=now - age_d(age)))


def age_d(days: int) -> timedelta:
    return timedelta(days=days)


def test_recovery_prunes_what_no_reader_uses(env):
    db = env.settings().db_url
    _seed(db)
    assert LedgerView(db).seen_chunk_hashes(["old", "fresh"]) == {"fresh"}, "TTL honoured"
    env.invoke("drain", "--until-idle", "--max-seconds", "30")  # recovery runs first
    with session_scope(db) as s:
        assert set(s.scalars(select(ChunkHash.hash))) == {"fresh"}
        workers = set(s.scalars(select(Heartbeat.worker)))  # + the drain's own
        assert "gone:1" not in workers and {"recent:2", "alive:3"} <= workers
    assert LedgerView(db).seen_chunk_hashes(["old", "fresh"]) == {"fresh"}, "same answer"


def test_the_newest_heartbeat_survives_any_retention(env):
    db = env.settings().db_url
    now = utcnow()
    with session_scope(db) as s:
        for name, age in (("a", 30), ("b", 20)):
            s.add(Heartbeat(worker=name, host="h", pid=1, started_at=now, beat_at=now - age_d(age)))
    with session_scope(db) as s:
        before = control.last_heartbeat(s)
        assert control.prune_heartbeats(s) == 1
    with session_scope(db) as s:
        assert control.last_heartbeat(s) == before, "status and doctor see the same beat"
        assert control.prune_heartbeats(s) == 0
        assert learnings.prune_chunks(s, ttl_days=0) == 0


def test_queue_delay_from_the_hook_timestamp():
    assert queue_delay(100.0, now=100.25) == {"queue_delay_ms": 250}
    assert queue_delay(100.0, now=99.0) == {"queue_delay_ms": 0}, "a clock behind the hook's"
    for bad in (None, "100", True, math.nan, math.inf):
        assert queue_delay(bad, now=100.0) == {}


def test_a_hook_capture_logs_its_queue_delay(env):
    t = transcripts_dir() / "hello-world-script.jsonl"
    payload = {"session_id": "delay", "transcript_path": str(t), "hook_event_name": "Stop"}
    subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        check=True,
        timeout=30,
    )
    env.invoke("enqueue", str(t), "--session-id", "by-hand")
    env["REFLECT_DRAIN_SKIP_REINDEX"] = "1"
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    lines = [json.loads(x) for x in (env.home / "drain.log").read_text().splitlines()]
    captured = {x["session_id"]: x for x in lines if x.get("event") == "captured"}
    delay = captured["delay"]["queue_delay_ms"]
    assert isinstance(delay, int) and 0 <= delay < 120_000
    assert "queue_delay_ms" not in captured["by-hand"], "enqueue sends no hook timestamp"
