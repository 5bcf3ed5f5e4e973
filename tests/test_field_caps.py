"""Model-written fields are bounded end to end (hardening item 9): a hostile answer with a
5 MB title and body goes through the real drain and the stub ``claude``, and leaves a note
and a stored plan of bounded size, with the cut recorded on the job."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select
from support import STUB_CLAUDE, write_claude_transcript

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, Learning
from reflect_jobs.writer.actions import FIELD_MAX_CHARS


def test_a_5mb_title_and_body_become_a_bounded_note_with_a_recorded_reason(env, tmp_path):
    big = "A" * 5_000_000
    quote = "never mutate the shared config at import time"  # evidence the transcript holds
    learning = {
        "title": big,
        "rule": "never do it",
        "body": big,
        "category": "x",
        "evidence": quote,
    }
    envelope = json.loads((STUB_CLAUDE.parent / "answers" / "success.json").read_text())
    envelope["result"] = json.dumps({"actions": [{"action": "CREATE", "learning": learning}]})
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(envelope))
    env.update(STUB_CLAUDE_MODE="file", STUB_CLAUDE_FILE=str(answer))
    t = write_claude_transcript(
        tmp_path / "t.jsonl", ["No, that's wrong: never mutate the shared config at import time."]
    )
    job_id = env.invoke("enqueue", str(t), "--session-id", "big").stdout.strip()
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert (shown["state"], shown["outcome"]) == ("done", "ok")
    (note,) = (env.kb / "documents").glob("*.md")
    assert note.stat().st_size < 100_000, "the note is bounded, not 10 MB"
    detail = shown["events"][-1]["detail"]
    assert "title cut from 5000000 to 200 chars" in detail and "body cut from" in detail
    with session_scope(env.settings().db_url) as s:
        job = s.get(Job, job_id)
        assert len(json.dumps(job.actions)) < 100_000, "the stored plan is bounded"
        (row,) = s.scalars(select(Learning)).all()
        assert len(row.title) == FIELD_MAX_CHARS["title"]
        assert s.scalar(select(func.count()).select_from(Learning)) == 1
    assert Path(env["STUB_CLAUDE_LOG"]).read_text().count("\n") == 1


def test_the_recorded_answer_of_a_runaway_model_is_bounded_too(env, tmp_path):
    from reflect_jobs.ledger.costs import RAW_ANSWER_MAX_CHARS
    from reflect_jobs.ledger.models import CostRow

    envelope = json.loads((STUB_CLAUDE.parent / "answers" / "success.json").read_text())
    envelope["result"] = json.dumps(
        {
            "actions": [
                {
                    "action": "CREATE",
                    "learning": {
                        "title": "B" * 5_000_000,
                        "evidence": "never log the request body",
                    },
                }
            ]
        }
    )
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(envelope))
    env.update(STUB_CLAUDE_MODE="file", STUB_CLAUDE_FILE=str(answer))
    t = write_claude_transcript(tmp_path / "t.jsonl", ["No, never log the request body."])
    env.invoke("enqueue", str(t), "--session-id", "big2")
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    with session_scope(env.settings().db_url) as s:
        (row,) = s.scalars(select(CostRow)).all()
        assert row.outcome == "ok" and row.entries == 1
        assert len(row.raw_answer) <= RAW_ANSWER_MAX_CHARS, "not 10 MB of answer twice over"
