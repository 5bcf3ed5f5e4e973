"""Checkpoints, not every turn: the decision (pure), the fill read from real transcripts, and
a growing session through the real stage runners and the stub ``claude`` (ARCHITECTURE §14.1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import transcripts_dir
from watermark_support import CORRECTIONS, GrowingSession, InProcess, slice_body

from reflect_jobs.checkpoints import (
    BELOW_CHECKPOINT,
    Models,
    SessionState,
    is_deep_event,
    plan_pass,
)
from reflect_jobs.config import SettingsError, load_settings
from reflect_jobs.transcripts.usage import context_tokens, record_context_tokens

MODELS = Models(cheap="haiku", drain="sonnet", deep="opus")
DEFAULT = (20, 40, 60, 80)


def _plan(tokens, state=None, *, deep=False, thresholds=DEFAULT):  # type: ignore[no-untyped-def]
    return plan_pass(
        deep=deep,
        tokens=tokens,
        window=200_000,
        thresholds=thresholds,
        state=state,
        models=MODELS,
    )


def test_crossing_a_checkpoint_makes_one_pass_the_first_with_the_cheap_model():
    first = _plan(41_000)  # 20.5%
    assert (first.make_pass, first.kind, first.threshold, first.model) == (
        True,
        "checkpoint",
        20,
        "haiku",
    )
    again = _plan(60_000, SessionState(first.level_after, first.fill_pct))  # 30%: no new one
    assert (again.make_pass, again.kind, again.model, again.level_after) == (False, "none", "", 20)
    later = _plan(82_000, SessionState(20, 30.0))  # 41%
    assert (later.make_pass, later.threshold, later.model) == (True, 40, "sonnet")
    # A jump over two thresholds is one pass, at the higher one, with the drain model.
    jump = _plan(130_000, SessionState(20, 25.0))
    assert (jump.make_pass, jump.threshold, jump.model, jump.level_after) == (
        True,
        60,
        "sonnet",
        60,
    )


def test_no_usage_reads_as_zero_until_the_end_and_the_end_is_a_deep_pass():
    below = _plan(None)
    assert (below.make_pass, below.fill_pct) == (False, 0.0)
    end = _plan(None, SessionState(0, 0.0), deep=True)
    assert (end.make_pass, end.kind, end.model) == (True, "deep", "opus")


def test_a_shrunk_context_starts_over_without_a_pass_at_once():
    after_compact = _plan(50_000, SessionState(80, 95.0))  # 25% after a PreCompact at 95%
    assert (after_compact.make_pass, after_compact.level_after) == (False, 20)
    assert "shrank" in after_compact.reason
    grown = _plan(81_000, SessionState(20, 25.0))
    assert (grown.make_pass, grown.threshold) == (True, 40)


def test_a_deep_pass_records_where_the_session_stands():
    deep = _plan(170_000, SessionState(60, 70.0), deep=True)  # PreCompact at 85%
    assert (deep.kind, deep.level_after, deep.model) == ("deep", 80, "opus")


def test_checkpoints_off_makes_every_capture_a_pass():
    plan = _plan(1_000, SessionState(0, 0.5), thresholds=())
    assert (plan.make_pass, plan.kind, plan.model) == (True, "capture", "sonnet")
    assert _plan(1_000, thresholds=(), deep=True).model == "opus"


def test_deep_events_and_person_captures():
    for event in ("PreCompact", "SessionEnd", "preCompact", "sessionEnd", "idle", "manual"):
        assert is_deep_event(event), event
    assert is_deep_event("backfill")
    for event in ("Stop", "agentStop", "unknown", "SubagentStop"):
        assert not is_deep_event(event), event


def test_settings_parse_the_checkpoints_and_pick_the_models():
    s = load_settings({"REFLECT_CHECKPOINTS": "80,20, 40%"})
    assert s.checkpoints == (20, 40, 80)
    assert (s.cheap_pass_model, s.deep_pass_model) == ("haiku", "sonnet")
    assert load_settings({"REFLECT_CHECKPOINTS": "off"}).checkpoints == ()
    assert load_settings({}).checkpoints == DEFAULT
    assert load_settings({}).context_window == 200_000
    assert load_settings({}).session_idle_sec == 3600
    s = load_settings({"REFLECT_DEEP_MODEL": "opus", "REFLECT_DRAIN_MODEL": "sonnet"})
    assert s.deep_pass_model == "opus"
    # haiku is a Claude alias: another writer's cheap pass uses its own drain model.
    s = load_settings({"REFLECT_WRITER_BACKEND": "openai", "REFLECT_DRAIN_MODEL": "gpt-x"})
    assert s.cheap_pass_model == "gpt-x"
    for bad in ("20,abc", "0,20", "101"):
        with pytest.raises(SettingsError, match="REFLECT_CHECKPOINTS"):
            load_settings({"REFLECT_CHECKPOINTS": bad})


# --- the fill, read from the end of real transcripts ----------------------------------------


def test_context_tokens_of_real_claude_and_codex_transcripts():
    claude = transcripts_dir() / "hello-world-script.jsonl"
    last = None
    for line in claude.read_text().splitlines():  # the latest main-chain usage, by hand
        rec = json.loads(line)
        if rec.get("type") == "assistant" and not rec.get("isSidechain"):
            u = rec["message"].get("usage")
            if u:
                last = (
                    u["input_tokens"]
                    + u.get("cache_creation_input_tokens", 0)
                    + u.get("cache_read_input_tokens", 0)
                )
    assert last and context_tokens(str(claude)) == last
    codex = transcripts_dir().parent / "codex" / "agent-history-codex0.135-exec.jsonl"
    assert context_tokens(str(codex)) == 22539  # last_token_usage.input_tokens


def test_context_tokens_skips_sidechains_torn_lines_and_reads_far_back(tmp_path: Path):
    def asst(tokens: int, **extra: object) -> str:
        usage = {"input_tokens": tokens, "output_tokens": 1}
        return json.dumps({"type": "assistant", "message": {"usage": usage}, **extra})

    path = tmp_path / "t.jsonl"
    filler = json.dumps({"type": "user", "message": {"content": "x" * 1000}})
    path.write_text(
        "\n".join([asst(1234), *[filler] * 300, asst(99, isSidechain=True)])
        + '\n{"type": "assistant", "message": {"usage": {"input_tok'  # torn last line
    )
    assert context_tokens(str(path)) == 1234  # 300 KB back, past the sidechain
    path.write_text(filler + "\n")
    assert context_tokens(str(path)) is None


def test_copilot_usage_where_it_exists():
    assert (
        record_context_tokens(
            {"type": "session.usage_info", "data": {"currentTokens": 5000, "tokenLimit": 128000}}
        )
        == 5000
    )
    assert (
        record_context_tokens(
            {"type": "assistant.usage", "data": {"inputTokens": 10, "cacheReadTokens": 90}}
        )
        == 100
    )
    assert (
        record_context_tokens(
            {"type": "session.compaction_complete", "data": {"postCompactionTokens": 700}}
        )
        == 700
    )
    copilot = transcripts_dir().parent / "copilot-events.jsonl"
    assert context_tokens(str(copilot)) is None  # the CLI writes no usage to events.jsonl
    for hostile in ({"type": "assistant", "message": {"usage": {"input_tokens": -5}}}, [1], {}):
        assert record_context_tokens(hostile) in (0, None)


# --- a growing session through the stage runners ---------------------------------------------


def _calls(env) -> list[dict]:  # type: ignore[no-untyped-def]
    log = Path(env["STUB_CLAUDE_LOG"])
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _model(call: dict) -> str:
    argv = call["argv"]
    return argv[argv.index("--model") + 1]


def test_a_growing_session_pays_at_checkpoints_and_at_its_end(env, tmp_path, monkeypatch):
    env.pop("REFLECT_CHECKPOINTS")  # the defaults: 20, 40, 60, 80% of 200,000 tokens
    prompts = tmp_path / "prompts"
    env.update(REFLECT_DEEP_MODEL="opus", STUB_CLAUDE_PROMPTS=str(prompts))
    run = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "t.jsonl")

    s.turn(0, CORRECTIONS[0], tokens=20_000)  # 10%
    job = run.job(run.capture(s.path, "s-grow"))
    assert (job.outcome, _calls(env)) == (BELOW_CHECKPOINT, [])
    assert job.prepare_stats["pass"]["fill_pct"] == 10.0

    s.turn(1, CORRECTIONS[1], filler=4, tokens=44_000)  # 22%: the first checkpoint
    job = run.job(run.capture(s.path, "s-grow"))
    assert job.outcome == "ok" and job.prepare_stats["pass"]["threshold"] == 20
    assert [_model(c) for c in _calls(env)] == ["haiku"]

    s.turn(2, "ok thanks, looks good", tokens=60_000)  # 30%: nothing new crossed
    assert run.job(run.capture(s.path, "s-grow")).outcome == BELOW_CHECKPOINT
    assert len(_calls(env)) == 1

    s.turn(3, CORRECTIONS[2], filler=4, tokens=84_000)  # 42%: the drain model now
    assert run.job(run.capture(s.path, "s-grow")).outcome == "ok"
    s.turn(4, CORRECTIONS[3], filler=4, tokens=90_000)  # 45%, then the session ends
    end = run.job(run.capture(s.path, "s-grow", event="SessionEnd"))
    assert end.deep and end.outcome == "ok" and end.prepare_stats["pass"]["kind"] == "deep"
    assert [_model(c) for c in _calls(env)] == ["haiku", "sonnet", "opus"]

    # Each pass read from where the last committed one stopped: what was said since.
    bodies = [slice_body((prompts / f"{n}.txt").read_text()) for n in (1, 2, 3)]
    assert CORRECTIONS[0] in bodies[0] and CORRECTIONS[1] in bodies[0]
    assert CORRECTIONS[1] not in bodies[1] and CORRECTIONS[2] in bodies[1]
    assert CORRECTIONS[2] not in bodies[2] and CORRECTIONS[3] in bodies[2]


def test_a_person_capture_is_a_deep_pass_whatever_its_event(env, tmp_path, monkeypatch):
    env.pop("REFLECT_CHECKPOINTS")
    run = InProcess(env, tmp_path, monkeypatch)
    s = GrowingSession(tmp_path / "t.jsonl")
    s.turn(0, CORRECTIONS[0], tokens=2_000)  # 1%: a Stop would make no call
    job = run.job(run.capture(s.path, "s-grow", event="Stop", deep=True))
    assert (job.deep, job.outcome) == (True, "ok")
    assert [_model(c) for c in _calls(env)] == ["sonnet"]  # no REFLECT_DEEP_MODEL: drain's
