"""Immediate reclaim on a real SQLite ledger with real processes (``ledger/jobs.py``, ``owners.py``).

A claim records its owner (host, pid, start token). On this machine recovery takes a job back
at once when its owner is proven gone — and only then: a pid reused by another process is
told apart by its start time, a clock moved backwards changes nothing, and another host's
claim keeps the lease rule. A stopping consumer hands its jobs back without counting a crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import select

from reflect_jobs.ledger import costs, owners
from reflect_jobs.ledger.captures import record_capture
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import (
    claim,
    hand_back,
    recover_expired,
    resume_claiming,
    stop_claiming,
)
from reflect_jobs.ledger.models import CostRow, Job, JobEvent, utcnow
from reflect_jobs.ledger.owners import Owner

LINUX = sys.platform.startswith("linux")


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path}/reflect.db"


@pytest.fixture
def sleeper():
    """A real live process on this machine (not us), reaped after the test."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _identity(pid: int) -> Owner:
    token = owners.start_token(pid)
    assert token, "the start token of a live process is readable here"
    return Owner(owners.me().host, pid, token)


def _running(db, owner: Owner, *, lease_sec: int = 600, session_id: str = "s1") -> str:
    with session_scope(db) as s:
        res = record_capture(
            s,
            harness="claude",
            session_id=session_id,
            transcript_path="/t.jsonl",
            event="Stop",
            size=10,
            mtime=1.0,
            settle_sec=0,
        )
    with session_scope(db) as s:
        assert claim(s, res.job_id, "prepare", worker="w", lease_sec=lease_sec, owner=owner)
    return res.job_id


def _job(db, job_id) -> Job:
    with session_scope(db) as s:
        return s.get(Job, job_id)


def _recover(db, **kw):
    with session_scope(db) as s:
        return recover_expired(s, max_recoveries=3, **kw)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_claim_records_this_process_as_its_owner(db):
    job_id = _running(db, owners.me())
    job = _job(db, job_id)
    me = owners.me()
    assert (job.owner_host, job.owner_pid, job.owner_start) == (me.host, os.getpid(), me.start)
    assert _recover(db) == [], "our own live claim is not taken"


def test_a_dead_owner_on_this_host_is_reclaimed_at_once_with_its_call_settled(db, sleeper):
    owner = _identity(sleeper.pid)
    job_id = _running(db, owner, lease_sec=3600)
    with session_scope(db) as s:
        costs.record_started(s, s.get(Job, job_id), backend="claude", model="sonnet")
    assert _recover(db) == [], "alive: the lease decides"
    sleeper.kill()
    sleeper.wait()
    (got,) = _recover(db)
    assert (got.job_id, got.poisoned, got.owner_gone) == (job_id, False, True)
    job = _job(db, job_id)
    assert (job.state, job.recoveries, job.owner_pid) == ("queued", 1, None)
    with session_scope(db) as s:
        rows = s.scalars(select(CostRow).where(CostRow.job_id == job_id)).all()
        assert [(r.outcome, r.entries, r.consumed) for r in rows] == [("interrupted", 1, True)]
        details = s.scalars(select(JobEvent.detail).where(JobEvent.job_id == job_id)).all()
    assert any(d and f"owner {owner} is gone" in d for d in details)


def test_a_pid_reused_by_another_process_is_not_mistaken_for_the_owner(db, sleeper):
    """The recorded pid runs, but it is a process that started at another time."""
    other = _identity(sleeper.pid)
    if LINUX:  # the owner that held this pid started one clock tick earlier
        prefix, ticks = other.start.rsplit(":", 1)
        earlier = replace(other, start=f"{prefix}:{int(ticks) - 1}")
    else:
        earlier = replace(other, start="ps:Thu Jan 1 00:00:00 1970")
    job_id = _running(db, earlier, lease_sec=3600)
    assert owners.alive(earlier) is False
    (got,) = _recover(db)
    assert got.job_id == job_id and got.owner_gone
    assert _job(db, job_id).state == "queued"


def test_a_clock_moved_backwards_reclaims_no_live_job_and_still_frees_a_dead_ones(db, sleeper):
    live = _running(db, _identity(sleeper.pid), lease_sec=60, session_id="live")
    dead = _running(db, Owner(owners.me().host, _dead_pid(), owners.me().start), session_id="d")
    past = utcnow() - timedelta(hours=2)  # the wall clock went back two hours
    got = _recover(db, now=past)
    assert [r.job_id for r in got] == [dead], "the dead owner's job, by its pid, not by time"
    assert _job(db, live).state == "running"
    future = utcnow() + timedelta(seconds=30)  # and forwards within the lease: still held
    assert _recover(db, now=future) == []
    assert _job(db, live).state == "running"


def test_another_hosts_claim_keeps_the_lease_rule(db):
    far = Owner("other-host.example", _dead_pid(), owners.me().start)
    job_id = _running(db, far, lease_sec=3600)
    assert owners.alive(far) is None, "nothing here can prove another host's process gone"
    assert _recover(db) == [], "a live lease on another host is left alone"
    (got,) = _recover(db, now=utcnow() + timedelta(hours=2))
    assert got.job_id == job_id and not got.owner_gone
    assert "lease of w expired" in _events_detail(db, job_id)


@pytest.mark.skipif(not LINUX, reason="boot id and pid namespace are Linux's")
def test_another_boot_or_pid_namespace_with_our_host_name_keeps_the_lease_rule(db):
    me = owners.me()
    boot, rest = me.start.split(":", 2)[1], me.start.split(":", 2)[2]
    stranger = Owner(me.host, _dead_pid(), f"linux:{'0' * len(boot)}:{rest}")
    job_id = _running(db, stranger, lease_sec=3600)
    assert owners.alive(stranger) is None
    assert _recover(db) == []
    assert _job(db, job_id).state == "running"


def test_an_unreadable_owner_keeps_the_lease_rule(db):
    job_id = _running(db, Owner(owners.me().host, _dead_pid(), ""), lease_sec=3600)
    assert _recover(db) == [] and _job(db, job_id).state == "running"


def test_the_portable_start_token_tells_a_live_process_from_a_dead_one(sleeper):
    """The ``ps -o lstart`` reading used where there is no /proc, run here too."""
    token = owners.start_token(sleeper.pid, portable=True)
    if not token:
        pytest.skip("no ps(1) here")
    here = Owner(owners.me().host, os.getpid(), "ps:x")
    owner = Owner(here.host, sleeper.pid, token)
    assert owners.alive(owner, here=here) is True
    assert owners.alive(replace(owner, start="ps:Thu Jan 1 00:00:00 1970"), here=here) is False
    sleeper.kill()
    sleeper.wait()
    assert owners.alive(owner, here=here) is False


def test_hand_back_is_not_a_crash_and_settles_the_cut_short_call(db):
    me = owners.me()
    job_id = _running(db, me)
    other = _running(db, Owner("other-host.example", 1, "x"), session_id="s2")
    with session_scope(db) as s:
        costs.record_started(s, s.get(Job, job_id), backend="codex", model="m")
    with session_scope(db) as s:
        assert hand_back(s, me, reason="stopping on SIGTERM") == [(job_id, "prepare")]
    job = _job(db, job_id)
    assert (job.state, job.recoveries, job.failures, job.next_run_at is not None) == (
        "queued",
        0,
        0,
        True,
    )
    assert "handed back by" in _events_detail(db, job_id)
    assert _job(db, other).state == "running", "only our own jobs"
    with session_scope(db) as s:
        (row,) = s.scalars(select(CostRow).where(CostRow.job_id == job_id)).all()
        assert (row.outcome, row.entries) == ("interrupted", 1)


def test_a_stopping_process_takes_no_new_claim(db):
    job_id = _running(db, owners.me())
    with session_scope(db) as s:
        hand_back(s, owners.me(), reason="test")
    stop_claiming()
    try:
        with session_scope(db) as s:
            assert claim(s, job_id, "prepare", worker="w", lease_sec=60) is None
    finally:
        resume_claiming()
    with session_scope(db) as s:
        assert claim(s, job_id, "prepare", worker="w", lease_sec=60) is not None


def _events_detail(db, job_id) -> str:
    with session_scope(db) as s:
        return " | ".join(
            d or "" for d in s.scalars(select(JobEvent.detail).where(JobEvent.job_id == job_id))
        )
