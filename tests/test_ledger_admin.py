"""``ledger.admin`` on a real SQLite ledger: what ``jobs``, ``show``, ``retry``, ``poison
purge``, ``resume`` and ``errors`` do to the ledger, without a CLI in between.

The CLI tests cover the happy paths through a subprocess; these pin the rules a person
relies on when something is wrong: a retry is all or nothing, a job is scheduled only once
its change is committed, a purge takes the slice and keeps the money trail, an
acknowledged error leaves the default list.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from reflect_jobs.ledger import admin, control
from reflect_jobs.ledger.captures import record_capture
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import IllegalTransition, transition
from reflect_jobs.ledger.models import CostRow, Job, JobEvent, utcnow


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path}/reflect.db"


def _job(db, session_id, state="queued", *, stage=None, age_min=0, slice_path=None):
    """A captured job moved to ``state`` through real transitions (via running)."""
    with session_scope(db) as s:
        res = record_capture(
            s,
            harness="claude",
            session_id=session_id,
            transcript_path=f"/t/{session_id}.jsonl",
            event="Stop",
            size=10,
            mtime=1.0,
            settle_sec=0,
            now=utcnow() - timedelta(minutes=age_min),
        )
        job = s.get(Job, res.job_id)
        if stage is not None:
            job.stage = stage
        job.slice_path = slice_path
        if state != "queued":
            transition(s, job, to_state="running")
            transition(s, job, to_state=state, outcome=f"test_{state}", detail=f"made {state}")
        return res.job_id


def _state(db, job_id):
    with session_scope(db, readonly=True) as s:
        job = s.get(Job, job_id)
        return None if job is None else (job.stage, job.state)


class Recorder:
    """A ``schedule`` that also checks the job's change is already committed when called."""

    def __init__(self, db):
        self.db, self.calls, self.seen = db, [], []

    def __call__(self, stage, job_id):
        self.calls.append((stage, job_id))
        self.seen.append(_state(self.db, job_id))


def test_list_jobs_newest_first_with_state_filter_and_limit(db):
    old = _job(db, "old", age_min=30)
    mid = _job(db, "mid", "poisoned", age_min=20)
    new = _job(db, "new", age_min=10)
    assert [j["id"] for j in admin.list_jobs(db)] == [new, mid, old]
    assert [j["id"] for j in admin.list_jobs(db, limit=2)] == [new, mid]
    (poisoned,) = admin.list_jobs(db, state="poisoned")
    assert poisoned["id"] == mid and poisoned["outcome"] == "test_poisoned"
    assert set(poisoned) == {*admin.JOB_KEYS, "error"}
    assert isinstance(poisoned["created_at"], str) and poisoned["next_run_at"] is None
    assert admin.list_jobs(db, state="halted") == []


def test_job_detail_has_events_and_costs_in_order(db):
    job_id = _job(db, "s1", "poisoned")
    with session_scope(db) as s:
        s.add(CostRow(job_id=job_id, day="2026-01-01", outcome="fail_x", tokens=7, model="m"))
    data = admin.job_detail(db, job_id)
    assert [(e["from"], e["to"]) for e in data["events"]] == [
        (None, "queued"),
        ("queued", "running"),
        ("running", "poisoned"),
    ]
    assert data["events"][-1]["detail"] == "made poisoned"
    assert [(c["outcome"], c["tokens"], c["model"]) for c in data["costs"]] == [("fail_x", 7, "m")]
    assert {"prepare_stats", "actions", "slice_path", "recoveries", "failures"} <= set(data)
    with pytest.raises(admin.JobNotFound, match="^no job nope$"):
        admin.job_detail(db, "nope")


def test_retry_by_id_requeues_and_schedules_after_commit(db):
    job_id = _job(db, "s1", "quarantined", stage="add")
    sched = Recorder(db)
    assert admin.retry_jobs(db, [job_id], schedule=sched) == [(job_id, "add")]
    assert sched.calls == [("add", job_id)]
    assert sched.seen == [("add", "queued")], "the retry was committed before scheduling"


def test_retry_is_all_or_nothing(db):
    poisoned = _job(db, "p", "poisoned", stage="write")
    running_ok = _job(db, "q")  # queued: a person may not retry it
    sched = Recorder(db)
    with pytest.raises(admin.JobNotFound):
        admin.retry_jobs(db, [poisoned, "nope"], schedule=sched)
    with pytest.raises(IllegalTransition, match="only poisoned, quarantined or halted"):
        admin.retry_jobs(db, [poisoned, running_ok], schedule=sched)
    assert _state(db, poisoned) == ("write", "poisoned") and sched.calls == []


def test_retry_by_state_takes_only_those_states(db):
    p1 = _job(db, "p1", "poisoned", stage="write")  # no slice on disk: back to prepare
    p2 = _job(db, "p2", "poisoned", stage="add")
    quarantined = _job(db, "q", "quarantined")
    halted = _job(db, "h", "halted", stage="write")
    sched = Recorder(db)
    done = admin.retry_jobs(db, ["ignored"], states=("poisoned",), schedule=sched)
    assert sorted(done) == sorted([(p1, "prepare"), (p2, "add")])
    assert _state(db, quarantined)[1] == "quarantined" and _state(db, halted)[1] == "halted"
    assert admin.retry_jobs(db, states=("poisoned", "quarantined"), schedule=sched) == [
        (quarantined, "prepare")
    ]
    assert admin.retry_jobs(db, states=("poisoned",), schedule=sched) == []


def test_purge_removes_poisoned_jobs_and_slices_but_keeps_costs(db, tmp_path):
    slice_file = tmp_path / "slice.txt"
    slice_file.write_text("dialogue")
    gone = _job(db, "p", "poisoned", slice_path=str(slice_file))
    kept = _job(db, "q", "quarantined")
    with session_scope(db) as s:
        s.add(CostRow(job_id=gone, day="2026-01-01", outcome="fail_x", tokens=3))
    asked = []

    def decline(n):
        asked.append(n)
        return False

    assert admin.purge_poisoned(db, confirm=decline) is None and asked == [1]
    assert _state(db, gone) is not None and slice_file.exists()

    assert admin.purge_poisoned(db, confirm=lambda n: True) == 1
    assert _state(db, gone) is None and not slice_file.exists()
    assert _state(db, kept) is not None
    with session_scope(db, readonly=True) as s:
        assert s.scalars(select(JobEvent).where(JobEvent.job_id == gone)).all() == []
        (cost,) = s.scalars(select(CostRow)).all()
        assert (cost.job_id, cost.tokens) == (None, 3), "the money trail stays"
    assert admin.purge_poisoned(db, confirm=decline) == 0 and asked == [1], "none: no question"


def test_resume_clears_the_halt_and_requeues_halted_jobs(db):
    halted = _job(db, "h", "halted", stage="write")
    other = _job(db, "p", "poisoned")
    with session_scope(db) as s:
        control.set_flag(s, control.HALT_KEY, "auth failed")
    sched = Recorder(db)
    done = admin.resume(db, schedule=sched)
    assert done == admin.Resumed("auth failed", [(halted, "write")])
    assert sched.seen == [("write", "queued")]
    assert _state(db, other)[1] == "poisoned"
    with session_scope(db, readonly=True) as s:
        assert control.halt_reason(s) is None
    assert admin.resume(db, schedule=sched) == admin.Resumed(None, [])


def test_errors_list_and_ack(db):
    with session_scope(db) as s:
        first = control.record_error(s, kind="auth", message="token expired")
        second = control.record_error(s, kind="disk", message="full", severity="warning")
    rows = admin.list_errors(db)
    assert {r["id"] for r in rows} == {first, second}
    assert set(rows[0]) == {"id", "severity", "kind", "count", "last_at", "message", "acked"}
    admin.ack_error(db, first)
    assert [r["id"] for r in admin.list_errors(db)] == [second]
    acked = {r["id"]: r["acked"] for r in admin.list_errors(db, include_acked=True)}
    assert acked == {first: True, second: False}
    with pytest.raises(admin.ErrorNotFound, match="^no error err-nope$"):
        admin.ack_error(db, "err-nope")


def test_cost_report_reads_the_rows(db):
    job_id = _job(db, "s1")
    with session_scope(db) as s:
        s.add(CostRow(job_id=job_id, day="2026-01-01", outcome="ok", tokens=5))
    report = admin.cost_report(db, by="outcome", since=None)
    assert report["rows"]["ok"]["tokens"] == 5 and report["total"]["runs"] == 1
