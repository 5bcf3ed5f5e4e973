"""The daily retire cap (hardening item 10): at most ``REFLECT_MAX_RETIRE_PER_DAY`` automatic
retirements per UTC day in all; the rest wait as proposals a person applies or rejects.

The end-to-end test grows one session over three captures while the stub ``claude``
answers like a runaway belief revision (``delete_listed``: DELETE every learning the
revision block lists); before the cap, every listed learning was retired.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import yaml
from sqlalchemy import select
from support import write_claude_transcript

from reflect_jobs.ledger import learnings, proposals
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning, RetireProposal, utcnow


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path}/reflect.db"


def _learning(session, lid: str) -> None:
    learnings.upsert_learning(
        session,
        learning_id=lid,
        title=lid,
        category="x",
        learning_type="bug-fix",
        confidence_num=0.6,
        note_path=f"/nonexistent/{lid}.md",
        content_hash="0" * 64,
        source="/t/seed.jsonl",
        session_id="seed",
        signal_hash=None,
        job_id="seedjob",
    )


def test_budget_counts_todays_job_retirements_only(db):
    with session_scope(db) as s:
        for i in range(4):
            _learning(s, f"lrn-{i}")
    with session_scope(db) as s:
        assert proposals.remaining_retirements(s, 3) == 3
        assert learnings.retire(s, "lrn-0", reason="r", job_id="j1")
        assert learnings.retire(s, "lrn-1", reason="r", job_id=None)  # a person: not counted
    with session_scope(db) as s:
        assert proposals.remaining_retirements(s, 3) == 2
        tomorrow = utcnow() + timedelta(days=1)
        assert proposals.remaining_retirements(s, 3, now=tomorrow) == 3, "a new UTC day"
        assert proposals.remaining_retirements(s, 0) == 0


def test_propose_apply_reject_and_their_errors(db):
    with session_scope(db) as s:
        for i in range(3):
            _learning(s, f"lrn-{i}")
    with session_scope(db) as s:
        assert proposals.propose(s, "lrn-0", reason="c", job_id="j", source="/t/a")
        assert not proposals.propose(s, "lrn-0", reason="again", job_id="j2", source="/t/a")
        assert proposals.propose(s, "lrn-1", reason="c", job_id="j", source="/t/a")
        assert not proposals.propose(s, "lrn-missing", reason="c", job_id="j", source=None)
    with session_scope(db) as s:
        assert proposals.pending_count(s) == 2
        first, second = (p["id"] for p in proposals.list_proposals(s))
        applied = proposals.apply_proposal(s, first, by="tester")
        assert applied.status == "applied" and not applied.note_synced
        assert proposals.reject_proposal(s, second, by="tester").status == "rejected"
    with session_scope(db) as s:
        assert s.get(Learning, "lrn-0").status == "retired"
        assert s.get(Learning, "lrn-1").status == "active"
        assert proposals.pending_count(s) == 0
        assert proposals.remaining_retirements(s, 1) == 1, "a person's apply is not counted"
        assert proposals.unsynced(s) == [first]
        with pytest.raises(proposals.ProposalError, match="already applied"):
            proposals.apply_proposal(s, first, by="tester")
        with pytest.raises(proposals.ProposalError, match="no retire proposal 99"):
            proposals.reject_proposal(s, 99, by="tester")
        # A learning retired meanwhile: applying is refused, rejecting still works.
        assert proposals.propose(s, "lrn-2", reason="c", job_id="j", source=None)
    with session_scope(db) as s:
        (third,) = (p["id"] for p in proposals.list_proposals(s))
        assert learnings.retire(s, "lrn-2", reason="elsewhere", job_id="j9")
    with session_scope(db) as s, pytest.raises(proposals.ProposalError, match="reject"):
        proposals.apply_proposal(s, third, by="tester")


def _frontmatter(path) -> dict:
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text.split("\n---\n", 1)[0].removeprefix("---\n"))


def test_a_growing_session_retires_at_most_the_daily_cap(env, tmp_path):
    env.update(REFLECT_MAX_RETIRE_PER_DAY="2", REFLECT_DRAIN_DEBOUNCE_SEC="0")
    # Seed: eight learnings whose titles every later signal overlaps (revision block).
    creates = [
        {
            "action": "CREATE",
            "learning": {
                "title": f"jitter rule-{i}: never retry without jitter",
                "rule": f"r{i}",
                "evidence": "the rule is full jitter on every retry",  # the seed session's
            },
        }
        for i in range(8)
    ]
    env.update(
        STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps({"actions": creates})
    )
    seed = write_claude_transcript(
        tmp_path / "seed.jsonl", ["Stop: the rule is full jitter on every retry."], session="seed"
    )
    env.invoke("enqueue", str(seed), "--session-id", "seed")
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    db = env.settings().db_url
    with session_scope(db) as s:
        assert len(s.scalars(select(Learning)).all()) == 8
    # One session, re-captured three times as it grows; the model retires all it is shown.
    env["STUB_CLAUDE_MODE"] = "delete_listed"
    grow = tmp_path / "grow.jsonl"
    corrections: list[str] = []
    for turn in range(3):
        corrections.append(f"No, that's wrong: never retry call {turn} without jitter.")
        write_claude_transcript(grow, corrections, session="grow", trailing=True)
        env.invoke("enqueue", str(grow), "--session-id", "grow")
        env.invoke("drain", "--until-idle", "--max-seconds", "90")
    with session_scope(db) as s:
        rows = s.scalars(select(Learning)).all()
        retired = sorted(r.id for r in rows if r.status == "retired")
        pending = s.scalars(select(RetireProposal).where(RetireProposal.status == "pending")).all()
    assert len(retired) == 2, "exactly the daily cap of automatic retirements"
    assert len(pending) >= 3, "the rest are held as proposals"
    assert not {p.learning_id for p in pending} & set(retired)
    notes = {_frontmatter(p)["id"]: _frontmatter(p) for p in (env.kb / "documents").glob("*.md")}
    assert sorted(i for i, fm in notes.items() if fm.get("status") == "retired") == retired
    status = json.loads(env.invoke("status", "--json").stdout)
    assert status["proposals"] == {"pending": len(pending)}
    assert f"retire proposals: {len(pending)} pending" in env.invoke("status").stdout
    listed = json.loads(env.invoke("proposals", "--json").stdout)
    assert [p["id"] for p in listed] == [p.id for p in pending]
    first, second = listed[0], listed[1]
    env.invoke("proposals", "apply", str(first["id"]))
    env.invoke("proposals", "reject", str(second["id"]))
    assert (
        _frontmatter(next((env.kb / "documents").glob(f"{first['learning_id']}.md")))["status"]
        == "retired"
    )
    with session_scope(db) as s:
        assert s.get(Learning, first["learning_id"]).status == "retired"
        assert s.get(Learning, second["learning_id"]).status == "active"
    after = json.loads(env.invoke("status", "--json").stdout)
    assert after["proposals"]["pending"] == len(pending) - 2
    again = env.invoke("proposals", "apply", str(first["id"]), check=False)
    assert again.returncode == 1 and "already applied" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    bad = env.invoke("proposals", "reject", "nope", check=False)
    assert bad.returncode == 2


@pytest.mark.services
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_racing_adds_never_retire_past_the_cap(tmp_path, backend):
    import threading
    import uuid

    import sqlalchemy as sa

    from reflect_jobs.ledger.db import dispose_all

    admin = name = None
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/race.db"
    else:
        name = "rj_rc_" + uuid.uuid4().hex[:8]
        admin = sa.create_engine(
            "postgresql+psycopg://postgres@127.0.0.1:5432/postgres", isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as c:
            c.exec_driver_sql(f"CREATE DATABASE {name}")
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        with session_scope(url) as s:
            for i in range(8):
                _learning(s, f"lrn-{i}")
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def add(i: int) -> None:  # what one add transaction does with one DELETE
            try:
                barrier.wait()
                with session_scope(url) as s:
                    if proposals.remaining_retirements(s, 3) > 0:
                        learnings.retire(s, f"lrn-{i}", reason="r", job_id=f"j{i}")
                    else:
                        proposals.propose(s, f"lrn-{i}", reason="r", job_id=f"j{i}", source=None)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        with session_scope(url) as s:
            statuses = [r.status for r in s.scalars(select(Learning))]
            assert statuses.count("retired") == 3
            assert proposals.pending_count(s) == 5
    finally:
        dispose_all()
        if admin is not None:
            with admin.connect() as c:
                c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.dispose()
