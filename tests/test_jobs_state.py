"""The job state machine on a real SQLite ledger: every transition, claims, recovery."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import select

from reflect_jobs.ledger.captures import record_capture
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import (
    ALLOWED,
    STATES,
    IllegalTransition,
    claim,
    due_jobs,
    recover_expired,
    retry_job,
    transition,
)
from reflect_jobs.ledger.models import Job, JobEvent, utcnow


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path}/reflect.db"


def _capture(db, session_id="s1", settle=0, harness="claude"):
    with session_scope(db) as s:
        return record_capture(
            s,
            harness=harness,
            session_id=session_id,
            transcript_path="/t.jsonl",
            event="Stop",
            size=10,
            mtime=1.0,
            settle_sec=settle,
        )


def _events(db, job_id):
    with session_scope(db) as s:
        return [
            (e.from_state, e.to_state)
            for e in s.scalars(
                select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
            )
        ]


def test_capture_creates_a_queued_prepare_job_with_an_event(db):
    res = _capture(db)
    assert res.created
    with session_scope(db) as s:
        job = s.get(Job, res.job_id)
        assert (job.stage, job.state, job.accepting) == ("prepare", "queued", True)
    assert _events(db, res.job_id) == [(None, "queued")]


def test_captures_of_one_session_coalesce_and_push_settle_out(db):
    first = _capture(db, settle=30)
    second = _capture(db, settle=60)
    assert not second.created and second.job_id == first.job_id
    assert second.prepare_at > first.prepare_at
    with session_scope(db) as s:
        assert s.get(Job, first.job_id).captures == 2
        assert len(s.scalars(select(Job)).all()) == 1


def test_other_sessions_and_harnesses_get_their_own_jobs(db):
    ids = {
        _capture(db, "a").job_id,
        _capture(db, "b").job_id,
        _capture(db, "a", harness="codex").job_id,
    }
    assert len(ids) == 3


def test_capture_after_prepare_started_is_a_new_job(db):
    first = _capture(db)
    with session_scope(db) as s:
        job = claim(s, first.job_id, "prepare", worker="w", lease_sec=60)
        job.accepting = False
    assert _capture(db).created


def test_claim_is_exclusive_and_idempotent(db):
    res = _capture(db)
    with session_scope(db) as s:
        assert claim(s, res.job_id, "prepare", worker="w1", lease_sec=60) is not None
    with session_scope(db) as s:
        assert claim(s, res.job_id, "prepare", worker="w2", lease_sec=60) is None
        assert claim(s, res.job_id, "write", worker="w2", lease_sec=60) is None
    assert _events(db, res.job_id) == [(None, "queued"), ("queued", "running")]


def test_claim_waits_for_next_run_at(db):
    res = _capture(db, settle=60)
    with session_scope(db) as s:
        assert claim(s, res.job_id, "prepare", worker="w", lease_sec=60) is None
        assert (
            claim(
                s,
                res.job_id,
                "prepare",
                worker="w",
                lease_sec=60,
                now=utcnow() + timedelta(seconds=61),
            )
            is not None
        )


def test_many_threads_race_one_claim_exactly_one_wins(db):
    res = _capture(db)
    wins = []
    barrier = threading.Barrier(8)

    def racer(i):
        barrier.wait()
        with session_scope(db) as s:
            if claim(s, res.job_id, "prepare", worker=f"w{i}", lease_sec=60):
                wins.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1


# The legal state moves, written out from the design (ARCHITECTURE §3) — not read from the code,
# so a change to ``ALLOWED`` that the design does not make fails here.
_FROM_RUNNABLE = {"running", "queued", "deferred", "done", "halted"}  # running: claim()
DESIGN_MOVES: dict[str, set[str]] = {
    "queued": _FROM_RUNNABLE,
    "deferred": _FROM_RUNNABLE,
    "retrying": _FROM_RUNNABLE,
    "running": {"queued", "deferred", "retrying", "done", "poisoned", "quarantined", "halted"},
    "halted": {"queued"},  # a person's resume
    "poisoned": {"queued"},  # a person's retry
    "quarantined": {"queued"},  # a person's retry
    "done": set(),
}
ALL_STATES = sorted(DESIGN_MOVES)


def test_the_code_knows_exactly_the_designed_states_and_moves():
    assert sorted(STATES) == ALL_STATES
    assert {src: set(dsts) for src, dsts in ALLOWED.items()} == DESIGN_MOVES


@pytest.mark.parametrize("src", ALL_STATES)
def test_transition_table_is_enforced(db, src):
    """Every designed move works and writes its event; every other move raises."""
    for dst in ALL_STATES:
        res = _capture(db, session_id=f"{src}-{dst}")
        with session_scope(db) as s:
            job = s.get(Job, res.job_id)
            job.state = src
        with session_scope(db) as s:
            job = s.get(Job, res.job_id)
            if dst in DESIGN_MOVES[src]:
                transition(s, job, to_state=dst, detail="t")
                assert job.state == dst
            else:
                with pytest.raises(IllegalTransition):
                    transition(s, job, to_state=dst)
        with session_scope(db) as s:
            assert s.get(Job, res.job_id).state == (dst if dst in DESIGN_MOVES[src] else src)
        moved = [(None, "queued")] + ([(src, dst)] if dst in DESIGN_MOVES[src] else [])
        assert _events(db, res.job_id) == moved, (src, dst)


def test_unknown_states_are_refused(db):
    res = _capture(db)
    with session_scope(db) as s, pytest.raises(IllegalTransition):
        transition(s, s.get(Job, res.job_id), to_state="finished")


def test_terminal_transition_sets_finished_and_closes_coalescing(db):
    res = _capture(db)
    with session_scope(db) as s:
        job = claim(s, res.job_id, "prepare", worker="w", lease_sec=60)
        transition(s, job, to_state="done", to_stage="done", outcome="skip_no_signal")
        assert job.finished_at is not None and not job.accepting and job.lease_owner is None


def test_expired_lease_is_recovered_then_poisoned_after_max(db):
    res = _capture(db)
    for n in range(1, 5):
        with session_scope(db) as s:
            t0 = utcnow() + timedelta(seconds=10 * n)
            assert (
                claim(s, res.job_id, "prepare", worker=f"dead{n}", lease_sec=0, now=t0) is not None
            )
        with session_scope(db) as s:
            out = recover_expired(s, max_recoveries=3, now=t0 + timedelta(seconds=1))
        assert len(out) == 1
        with session_scope(db) as s:
            job = s.get(Job, res.job_id)
            if n <= 3:
                assert (job.state, job.recoveries, out[0].poisoned) == ("queued", n, False)
            else:
                assert (job.state, job.outcome, out[0].poisoned) == (
                    "poisoned",
                    "poison_crash_loop",
                    True,
                )


def test_live_lease_is_not_recovered(db):
    res = _capture(db)
    with session_scope(db) as s:
        claim(s, res.job_id, "prepare", worker="alive", lease_sec=600)
    with session_scope(db) as s:
        assert recover_expired(s, max_recoveries=3) == []


def test_due_jobs_lists_only_runnable_now(db):
    now_job = _capture(db, "now").job_id
    _capture(db, "later", settle=600)
    with session_scope(db) as s:
        assert [j.id for j in due_jobs(s)] == [now_job]


def test_retry_resets_counters_and_requeues_at_stage(db, tmp_path):
    res = _capture(db)
    slice_file = tmp_path / "s.txt"
    slice_file.write_text("x")
    with session_scope(db) as s:
        job = claim(s, res.job_id, "prepare", worker="w", lease_sec=60)
        job.stage, job.failures, job.slice_path = "write", 3, str(slice_file)
        transition(s, job, to_state="poisoned", outcome="poison_retries")
    with session_scope(db) as s:
        job = s.get(Job, res.job_id)
        assert retry_job(s, job) == "write"
        assert (job.state, job.failures, job.finished_at) == ("queued", 0, None)
    with session_scope(db) as s, pytest.raises(IllegalTransition):
        retry_job(s, s.get(Job, res.job_id))


def test_retry_without_slice_restarts_at_prepare(db):
    res = _capture(db)
    with session_scope(db) as s:
        job = claim(s, res.job_id, "prepare", worker="w", lease_sec=60)
        job.stage, job.slice_path = "write", "/nonexistent/slice.txt"
        transition(s, job, to_state="quarantined", outcome="quarantine_oversized")
    with session_scope(db) as s:
        assert retry_job(s, s.get(Job, res.job_id)) == "prepare"
