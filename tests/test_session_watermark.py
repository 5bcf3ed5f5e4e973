"""The per-session watermark end to end: real CLI, real consumer, the stub ``claude``.

A session captured after every turn must send each turn once: before the watermark the
window around the last correction grew by the new lines (its chunk hash changed) and was
sent again with every capture.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sqlalchemy import select
from watermark_support import CORRECTIONS, GrowingSession, InProcess, slice_body

from reflect_jobs.cascade.slicing import CONTEXT_MARK
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow, Job, SessionWatermark


def _drain(env) -> None:
    env.setdefault("REFLECT_DRAIN_MAX", "20")  # more calls than the default 3 per window
    env.invoke("drain", "--until-idle", "--max-seconds", "60")


def _prompts(env) -> list[str]:
    d = Path(env["STUB_CLAUDE_PROMPTS"])
    if not d.exists():
        return []
    return [(d / f"{i}.txt").read_text() for i in range(1, len(os.listdir(d)) + 1)]


def _outcomes(env) -> list[str | None]:
    with session_scope(env.settings().db_url) as s:
        return list(s.scalars(select(Job.outcome).order_by(Job.created_at)))


def _marks(env) -> list[tuple[str, str, int]]:
    with session_scope(env.settings().db_url) as s:
        rows = s.scalars(select(SessionWatermark)).all()
        return [(r.harness, r.session_key, r.byte_offset) for r in rows]


def _new_lines(body: str) -> list[str]:
    return [ln for ln in body.splitlines() if ln.strip() and not ln.startswith(CONTEXT_MARK)]


def test_growing_session_captured_after_each_turn_sends_only_the_new_turns(env, tmp_path):
    env["STUB_CLAUDE_PROMPTS"] = str(tmp_path / "prompts")
    s = GrowingSession(tmp_path / "grow.jsonl")
    for k, correction in enumerate(CORRECTIONS[:3]):
        s.turn(k, correction)
        env.invoke("enqueue", str(s.path), "--session-id", "grow")
        _drain(env)
    prompts = _prompts(env)
    assert len(prompts) == 3, "one paid call per capture"
    for k, prompt in enumerate(prompts):
        new = "\n".join(_new_lines(slice_body(prompt)))
        assert CORRECTIONS[k] in new
        for old in CORRECTIONS[:k]:  # already reflected on and committed: never sent as new
            assert old not in new, (k, old, prompt)
    # Context lines before the watermark are sent, and marked (the writer knows they are old).
    later = slice_body(prompts[1])
    assert f"{CONTEXT_MARK}Understood, fixing it (turn 0)." in later
    assert _outcomes(env) == ["ok"] * 3
    ((harness, key, offset),) = _marks(env)
    assert (harness, key, offset) == ("claude", "grow", s.path.stat().st_size)


def _prompt_files(tmp_path: Path) -> list[str]:
    d = tmp_path / "prompts"
    return [(d / f"{i}.txt").read_text() for i in range(1, len(os.listdir(d)) + 1)]


def test_unchanged_recapture_and_a_recapture_without_new_dialogue_are_free(
    env, tmp_path, monkeypatch
):
    p = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "same.jsonl")
    s.turn(0, CORRECTIONS[0])
    first = p.capture(s.path, "same")
    again = p.capture(s.path, "same")  # nothing changed: free without reading the file
    # The file grows by records that are not dialogue (a summary line): read, still $0.
    with s.path.open("a") as fh:
        fh.write(json.dumps({"type": "summary", "summary": "x", "leafUuid": "u2"}) + "\n")
    grown = p.capture(s.path, "same")
    assert [p.job(j).outcome for j in (first, again, grown)] == [
        "ok",
        "skip_unchanged",
        "skip_no_new_signal",
    ]
    assert len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines()) == 1
    with session_scope(p.settings.db_url) as sess:
        paid = {r.job_id: (r.cost_usd, r.entries) for r in sess.scalars(select(CostRow))}
    assert paid[first][0] > 0 and paid[again] == paid[grown] == (0.0, 0)


def test_a_failed_write_retried_sends_the_same_windows(env, tmp_path, monkeypatch):
    env.update(
        STUB_CLAUDE_PROMPTS=str(tmp_path / "prompts"),
        STUB_CLAUDE_MODE="sequence",
        STUB_CLAUDE_SEQUENCE="ok,prose,ok",
        STUB_CLAUDE_STATE=str(tmp_path / "seq"),
    )
    p = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "retry.jsonl")
    s.turn(0, CORRECTIONS[0])
    p.capture(s.path, "retry")
    mark = p.mark("retry")
    s.turn(1, CORRECTIONS[1])
    job = p.capture(s.path, "retry")  # the first attempt answers prose (retryable), then ok
    first, failed, retried = _prompt_files(tmp_path)
    assert failed == retried and CORRECTIONS[1] in failed
    assert CORRECTIONS[0] not in "\n".join(_new_lines(slice_body(failed)))
    assert (p.job(job).outcome, p.job(job).attempts) == ("ok", 2)
    assert p.mark("retry") == s.path.stat().st_size > (mark or 0)


def test_a_poisoned_job_leaves_the_watermark_the_next_capture_sends_its_turns(
    env, tmp_path, monkeypatch
):
    env.update(
        STUB_CLAUDE_PROMPTS=str(tmp_path / "prompts"),
        STUB_CLAUDE_MODE="sequence",
        STUB_CLAUDE_SEQUENCE="ok,prose,ok",
        STUB_CLAUDE_STATE=str(tmp_path / "seq"),
        REFLECT_DRAIN_MAX_RETRIES="1",
    )
    p = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "poison.jsonl")
    s.turn(0, CORRECTIONS[0])
    p.capture(s.path, "p")
    mark = p.mark("p")
    s.turn(1, CORRECTIONS[1])
    poisoned = p.capture(s.path, "p")
    assert p.job(poisoned).state == "poisoned"
    assert p.mark("p") == mark, "a failed write never moves the watermark"
    s.turn(2, CORRECTIONS[2])
    p.capture(s.path, "p")
    new = "\n".join(_new_lines(slice_body(_prompt_files(tmp_path)[-1])))
    assert CORRECTIONS[1] in new and CORRECTIONS[2] in new, "the failed turn is not lost"
    assert CORRECTIONS[0] not in new


def test_truncated_or_rewritten_transcript_is_treated_as_new(env, tmp_path, monkeypatch):
    env["STUB_CLAUDE_PROMPTS"] = str(tmp_path / "prompts")
    p = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "cut.jsonl")
    s.turn(0, CORRECTIONS[0])
    s.turn(1, CORRECTIONS[1])
    p.capture(s.path, "cut")
    offset = p.mark("cut")
    # Rewritten shorter, with new text: the watermark now lies beyond the end of the file.
    s2 = GrowingSession(s.path)
    s2.turn(5, CORRECTIONS[3])
    assert offset is not None and s.path.stat().st_size < offset
    job = p.capture(s.path, "cut")
    prompts = _prompt_files(tmp_path)
    assert len(prompts) == 2 and CORRECTIONS[3] in slice_body(prompts[1])
    assert CONTEXT_MARK not in slice_body(prompts[1]), "nothing of the new file was seen"
    assert p.job(job).prepare_stats["watermark"]["reset"] is True
    assert p.mark("cut") == s.path.stat().st_size


def test_rewritten_prefix_of_the_same_length_is_treated_as_new(env, tmp_path, monkeypatch):
    env["STUB_CLAUDE_PROMPTS"] = str(tmp_path / "prompts")
    p = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "edit.jsonl")
    s.turn(0, CORRECTIONS[0])
    p.capture(s.path, "edit")
    # An edit inside what was reflected (same length, so only the prefix hash can tell),
    # then a new turn: the whole file is new again, the edited correction included.
    data = s.path.read_text().replace("KeyError", "TypeErr!")
    s.path.write_text(data)
    s.turn(1, CORRECTIONS[1])
    p.capture(s.path, "edit")
    body = slice_body(_prompt_files(tmp_path)[-1])
    assert "catch TypeErr!" in "\n".join(_new_lines(body)) and CORRECTIONS[1] in body
