"""The write lease (hardening item 7): at most ``REFLECT_WRITE_CONCURRENCY`` paid calls in
flight across every worker and consumer, so the quota gate and the caps act on the latest
telemetry; a killed holder never blocks the queue (chaos tests below)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from support import BIN, flushable_redis_db, write_claude_transcript

from reflect_jobs.write_lease import WriteLease

REDIS_DB = int(os.environ.get("RJ_TEST_REDIS_DB", "11"))


def _enqueue(env, tmp_path, n: int) -> None:
    """``n`` sessions captured through the real hook (stdlib: far faster than the CLI)."""
    for i in range(n):
        t = write_claude_transcript(
            tmp_path / f"w{i}.jsonl",
            [f"No, that's wrong: never retry request {i} without jitter."],
        )
        payload = {"session_id": f"lease{i}", "transcript_path": str(t), "hook_event_name": "Stop"}
        hook = subprocess.run(
            [str(BIN / "reflect-jobs-hook"), "claude"],
            input=json.dumps(payload).encode(),
            env=dict(env),
            capture_output=True,
            timeout=30,
        )
        assert hook.returncode == 0, hook.stderr


def _two_drains(env) -> None:
    """Two consumers (separate processes, two worker threads each) on one SQLite queue."""
    procs = [
        subprocess.Popen(
            [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "120", "-w", "2"],
            env=dict(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(180) == 0, p.stderr.read()


def _jobs(env) -> list[dict]:
    return json.loads(env.invoke("jobs", "--json").stdout)


def test_two_consumers_never_have_two_calls_in_flight(env, tmp_path):
    times = tmp_path / "times.jsonl"
    env.update(
        STUB_CLAUDE_DELAY="0.4",  # each call stays in flight long enough to be overlapped
        STUB_CLAUDE_TIMES=str(times),
        REFLECT_DRAIN_DEBOUNCE_SEC="0",  # no run window: only the lease serialises calls
    )
    _enqueue(env, tmp_path, 6)
    _two_drains(env)
    assert [j["state"] for j in _jobs(env)] == ["done"] * 6
    spans = sorted(
        (rec["start"], rec["end"]) for rec in map(json.loads, times.read_text().splitlines())
    )
    assert len(spans) == 6, "one call per job"
    overlaps = [(a, b) for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1]]
    assert not overlaps, f"calls in flight at once: {overlaps}"


def test_the_first_answers_telemetry_holds_every_other_worker(env, tmp_path):
    # The first answer reports five_hour at 0.97 (over 0.95): with the lease, every other
    # worker's quota gate reads that telemetry before it calls. Without it, 4 of 6 trials
    # made a second call before the first answer closed the gate.
    env.update(STUB_CLAUDE_MODE="quota_warning", STUB_CLAUDE_DELAY="0.4")
    _enqueue(env, tmp_path, 6)
    _two_drains(env)
    calls = Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()
    assert len(calls) == 1, "exactly one call before the gate closed"
    states = sorted(j["state"] for j in _jobs(env))
    assert states == ["deferred"] * 5 + ["done"]
    status = json.loads(env.invoke("status", "--json").stdout)
    assert status["quota"]["gate"] == "closed" and status["budget"]["used"] == 1


def test_flock_slots_are_exclusive_and_counted(tmp_path):
    one = WriteLease.for_flock(tmp_path, slots=1)
    held = one.try_acquire()
    assert held is not None
    assert one.try_acquire() is None, "a second fd in the same process is refused too"
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(one.acquire(0.2)))
    t.start()
    t.join()
    assert got == [None], "a waiter gives up after its wait"
    held.release()
    held.release()  # idempotent
    again = one.acquire(0)
    assert again is not None
    again.release()
    two = WriteLease.for_flock(tmp_path / "q", slots=2)
    a, b = two.try_acquire(), two.try_acquire()
    assert a is not None and b is not None and {a.index, b.index} == {0, 1}
    assert two.try_acquire() is None
    assert oct(os.stat(tmp_path / "q").st_mode & 0o777) == "0o700"
    assert oct(os.stat(two.path(0)).st_mode & 0o777) == "0o600"
    a.release()
    b.release()


@pytest.mark.services
def test_redis_slot_is_renewed_while_held_and_released_by_token(tmp_path):
    import redis

    conn = redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}")
    prefix = f"rj-lease-{tmp_path.name[-12:]}"
    lease = WriteLease.for_redis(conn, prefix=prefix, slots=1, ttl_sec=1)
    try:
        held = lease.try_acquire()
        assert held is not None and lease.try_acquire() is None
        # Held for 2.5 TTLs: the renewal thread keeps it (a waiter still gets nothing).
        assert lease.acquire(2.5) is None
        held.release()
        assert conn.get(lease.key(0)) is None
        conn.set(lease.key(0), "someone-else", px=60_000)
        held.release()  # a second release must not delete another holder's key
        assert conn.get(lease.key(0)) == b"someone-else"
    finally:
        conn.delete(lease.key(0))


KILLED_HOLDER_BACKENDS = [
    "sqlite",
    pytest.param("redis", marks=pytest.mark.services),
]


@pytest.mark.chaos  # SIGKILLs a consumer while it holds the write slot
@pytest.mark.parametrize("queue", KILLED_HOLDER_BACKENDS)
def test_a_killed_lease_holder_does_not_block_the_queue(env, tmp_path, queue):
    if queue == "redis":
        import redis

        db = flushable_redis_db()  # flushed: never the database the slot tests share
        redis.Redis.from_url(f"redis://127.0.0.1:6379/{db}").flushdb()
        env["REFLECT_QUEUE_URL"] = f"redis://127.0.0.1:6379/{db}"
    env.update(REFLECT_LEASE_SEC="2", REFLECT_WRITE_LEASE_TTL_SEC="2")
    _enqueue(env, tmp_path, 1)
    a = subprocess.run(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "60"],
        env=dict(env, REFLECT_FAILPOINTS="write:holding_lease"),
        capture_output=True,
        timeout=90,
    )
    assert a.returncode == -9, "consumer A died holding the write slot"
    assert not Path(env["STUB_CLAUDE_LOG"]).exists(), "A made no call"
    b = env.cli("drain", "--until-idle", "--max-seconds", "60", timeout=90)
    assert b.returncode == 0
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    assert len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()) == 1
