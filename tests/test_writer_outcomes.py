"""classify_attempt: SPEC-drain §9.2 (#7-11), §9.3 (#24, #28), §9.6 (#65-71) as outcome tests.

Results come from the real subprocess path (stub ``claude``) where a stub mode exists, and
from ``result_from_cli`` on literal CLI output for the field-level variants.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from reflect_jobs.writer import (
    AttemptContext,
    ClaudeCliBackend,
    HeuristicBackend,
    ModelResult,
    classify_attempt,
    result_from_cli,
)
from reflect_jobs.writer.classifier import Streak, track
from reflect_jobs.writer.outcomes import (
    DISPOSITION_MOVES,
    ERROR_KINDS,
    backend_missing_outcome,
    error_kind,
    job_move,
)

STUB = Path(__file__).parent / "stubs" / "claude"
FREE = {"fail_unknown_command", "quarantine_oversized", "fail_backend_missing"}


def run_stub(tmp_path: Path, mode: str, **env: str) -> ModelResult:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    extra = {"STUB_CLAUDE_MODE": mode, **env}
    return ClaudeCliBackend(str(STUB), "m", str(cwd), 20, extra_env=extra).call("prompt")


def cli(stdout: str | dict, stderr: str = "", exit_code: int | None = 0) -> ModelResult:
    text = stdout if isinstance(stdout, str) else json.dumps(stdout)
    return result_from_cli(text, stderr, backend="claude", model="m", exit_code=exit_code)


def ctx(**kw: int) -> AttemptContext:
    base = {"prior_failures": 0, "prior_timeouts": 0, "invalid_streak": 0}
    base.update(kw)
    return AttemptContext(**base)


def envelope(**kw: object) -> dict:
    env = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 1,
        "result": '{"actions": []}',
        "total_cost_usd": 0.01,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    env.update(kw)
    return env


# --- §9.2 silent success / unknown command ----------------------------------------------


def test_zero_turn_outage_halts_free(tmp_path: Path) -> None:  # #7
    out = classify_attempt(run_stub(tmp_path, "zero_turns"), ctx())
    assert (out.outcome, out.entries, out.disposition) == ("fail_unknown_command", 0, "halt")


def test_zero_turn_repeated_never_poisons(tmp_path: Path) -> None:  # #8
    result = run_stub(tmp_path, "zero_turns")
    # halts charge no retry, so the counters the caller passes never grow
    outs = [classify_attempt(result, ctx(prior_failures=2, invalid_streak=2)) for _ in range(5)]
    assert [o.outcome for o in outs] == ["fail_unknown_command"] * 5
    assert all(o.disposition == "halt" and o.entries == 0 for o in outs)


@pytest.mark.parametrize("turns", [0, 0.0, None, "0", "0.0", "garbage", "missing"])
def test_every_spelling_of_zero_turns_halts(turns: object) -> None:  # #9
    env = envelope(result="done", num_turns=turns)
    if turns == "missing":
        del env["num_turns"]
    result = cli(env)
    assert result.num_turns == 0
    assert classify_attempt(result, ctx()).outcome == "fail_unknown_command"


def test_zero_turns_with_cache_reads_still_halts() -> None:  # #10
    env = envelope(num_turns=0, usage={"cache_read_input_tokens": 4200})
    assert classify_attempt(cli(env), ctx()).outcome == "fail_unknown_command"


def test_genuine_run_is_ok() -> None:  # #11
    env = envelope(num_turns=2, total_cost_usd=0.31, usage={"input_tokens": 900})
    out = classify_attempt(cli(env), ctx())
    assert (out.outcome, out.entries, out.disposition, out.writer_class) == (
        "ok",
        1,
        "ok",
        "valid",
    )


def test_unknown_command_text_halts_even_with_turns() -> None:
    env = envelope(num_turns=1, result="Unknown command: /reflect")
    assert classify_attempt(cli(env), ctx()).outcome == "fail_unknown_command"


# --- §9.3 telemetry preserved on unparseable answers -----------------------------------


def test_prose_envelope_keeps_telemetry_and_retries() -> None:  # #24
    env = envelope(
        result="Here is what I found: nothing.",
        total_cost_usd=0.12,
        usage={
            "input_tokens": 70000,
            "output_tokens": 40,
            "cache_read_input_tokens": 7000,
            "cache_creation_input_tokens": 0,
        },
        rate_limit_info={"remaining": 5},
    )
    result = cli(env)
    stored = ModelResult.from_json(result.to_json())  # what the ledger keeps before parsing
    out = classify_attempt(stored, ctx())
    assert (out.outcome, out.entries, out.disposition) == ("fail_unparseable", 1, "retry")
    assert out.writer_class == "prose"
    assert stored.cost_usd == 0.12 and stored.tokens == 77040
    assert '"remaining": 5' in stored.raw_stdout


def test_non_json_result_text_is_retryable_not_raised(tmp_path: Path) -> None:  # #28
    out = classify_attempt(run_stub(tmp_path, "prose"), ctx())
    assert out.outcome == "fail_unparseable" and out.disposition == "retry"


# --- §9.6 outcome table ------------------------------------------------------------------


def test_max_turns_is_partial_and_terminal(tmp_path: Path) -> None:  # #65
    out = classify_attempt(run_stub(tmp_path, "max_turns"), ctx(expect_actions=False))
    assert (out.outcome, out.entries, out.disposition) == ("partial_max_turns", 1, "done")
    env = envelope(terminal_reason="max_turns", is_error=True, num_turns=8, result="")
    result = cli(env)
    assert result.num_turns == 8
    assert classify_attempt(result, ctx()).outcome == "partial_max_turns"


def test_timeout_without_output_poisons_first_time(tmp_path: Path) -> None:  # #66
    result = run_stub(tmp_path, "exit124")
    out = classify_attempt(result, ctx())
    assert (out.outcome, out.entries, out.disposition) == ("poison_timeout_exit_124", 1, "poison")
    assert out.writer_class == "idle"


def test_timeout_retries_knob() -> None:
    result = cli("", exit_code=124)
    off = classify_attempt(result, ctx(timeout_retries=0))
    assert (off.outcome, off.disposition) == ("fail_no_output_exit_124", "retry")
    two = ctx(timeout_retries=2)
    assert classify_attempt(result, two).disposition == "retry"
    assert classify_attempt(result, replace(two, prior_timeouts=1)).outcome == (
        "poison_timeout_exit_124"
    )
    killed = replace(result, exit_code=124, timed_out=True)
    assert classify_attempt(killed, ctx()).outcome == "poison_timeout_exit_124"


def test_no_output_other_exit_retries_then_poisons() -> None:
    result = cli("", stderr="boom", exit_code=1)
    out = classify_attempt(result, ctx())
    assert (out.outcome, out.entries, out.disposition) == ("fail_no_output_exit_1", 1, "retry")
    assert "boom" in out.detail
    assert classify_attempt(result, ctx(prior_failures=2)).disposition == "poison"


def test_is_error_retries_then_poisons(tmp_path: Path) -> None:  # #67
    result = run_stub(tmp_path, "is_error")
    out = classify_attempt(result, ctx())
    assert (out.outcome, out.entries, out.disposition) == ("fail_is_error", 1, "retry")
    assert out.writer_class == "valid"  # an API error is not writer drift
    last = classify_attempt(result, ctx(prior_failures=2))
    assert (last.outcome, last.entries, last.disposition) == ("fail_is_error", 1, "poison")


def test_nonzero_exit_with_clean_envelope(tmp_path: Path) -> None:
    out = classify_attempt(run_stub(tmp_path, "ok", STUB_CLAUDE_EXIT="3"), ctx())
    assert (out.outcome, out.disposition) == ("fail_exit_3", "retry")


def test_garbage_stdout_is_is_error_and_prose(tmp_path: Path) -> None:
    out = classify_attempt(run_stub(tmp_path, "garbage"), ctx())
    assert (out.outcome, out.writer_class) == ("fail_is_error", "prose")


def drive(results: list[ModelResult], *, threshold: int = 3, max_retries: int = 10) -> list:
    """The caller's loop: keep a drift streak and a failure count per job."""
    streak, failures, outs = Streak(), 0, []
    for result in results:
        c = ctx(
            prior_failures=failures,
            invalid_streak=streak.consecutive,
            invalid_threshold=threshold,
            max_retries=max_retries,
        )
        out = classify_attempt(result, c)
        outs.append(out)
        streak, respawn = track(streak, out.writer_class, threshold)
        assert respawn == (out.outcome == "poison_writer_drift")
        if respawn:
            streak = Streak()
        if out.disposition in ("retry", "poison") and out.entries:
            failures += 1
    return outs


def test_prose_three_times_is_writer_drift(tmp_path: Path) -> None:  # #68
    prose = run_stub(tmp_path, "prose")
    outs = drive([prose, prose, prose])
    assert [o.disposition for o in outs] == ["retry", "retry", "poison"]
    assert outs[2].outcome == "poison_writer_drift" and outs[2].entries == 1
    assert "3 consecutive" in outs[2].detail
    assert [o.writer_class for o in outs] == ["prose"] * 3


def test_threshold_one_poisons_first_prose(tmp_path: Path) -> None:  # #69
    [out] = drive([run_stub(tmp_path, "prose")], threshold=1)
    assert out.outcome == "poison_writer_drift"


def test_prose_prose_valid_resets_streak(tmp_path: Path) -> None:  # #70
    state = str(tmp_path / "n")
    env = {"STUB_CLAUDE_SEQUENCE": "prose,prose,ok,prose,prose", "STUB_CLAUDE_STATE": state}
    results = [run_stub(tmp_path, "sequence", **env) for _ in range(5)]
    outs = drive(results)
    assert [o.outcome for o in outs].count("ok") == 1
    assert outs[2].writer_class == "valid"
    assert "poison_writer_drift" not in [o.outcome for o in outs]


def test_size_rejection_is_free_quarantine(tmp_path: Path) -> None:  # #71 with the 5.2.4 fix
    out = classify_attempt(run_stub(tmp_path, "too_long"), ctx())
    assert (out.outcome, out.entries, out.disposition) == ("quarantine_oversized", 0, "quarantine")
    literal = cli({"is_error": True, "result": "Prompt is too long: way over"})
    assert classify_attempt(literal, ctx()).outcome == "quarantine_oversized"
    from_stderr = cli("", stderr="Error: context length exceeded", exit_code=1)
    assert classify_attempt(from_stderr, ctx()).outcome == "quarantine_oversized"
    bare_text = cli("Error: Prompt is too long: 250000 tokens > 200000 maximum", exit_code=1)
    assert classify_attempt(bare_text, ctx()).outcome == "quarantine_oversized"


def test_non_size_poison_marker_is_paid_drift() -> None:
    env = envelope(is_error=True, result="Credit balance is too low")
    out = classify_attempt(cli(env), ctx())
    assert (out.outcome, out.entries, out.writer_class) == ("poison_writer_drift", 1, "poisoned")


def test_valid_answer_mentioning_context_window_is_ok() -> None:  # #57 end to end
    text = json.dumps(
        {"actions": [{"action": "CREATE", "learning": {"title": "Mind the context window"}}]}
    )
    out = classify_attempt(cli(envelope(result=text)), ctx())
    assert out.outcome == "ok"


def test_token_budget_poisons() -> None:
    usage = {"input_tokens": 1_500_000, "cache_read_input_tokens": 500_001}
    out = classify_attempt(cli(envelope(usage=usage)), ctx())
    assert (out.outcome, out.entries, out.disposition) == ("poison_budget", 1, "poison")
    usage["cache_read_input_tokens"] = 500_000
    assert classify_attempt(cli(envelope(usage=usage)), ctx()).outcome == "ok"


def test_agentic_summary_is_not_drift() -> None:
    env = envelope(result="Wrote 2 learnings and ran reflect add.", num_turns=6)
    out = classify_attempt(cli(env), ctx(expect_actions=False))
    assert (out.outcome, out.writer_class) == ("ok", "valid")


def test_heuristic_result_is_ok() -> None:
    result = HeuristicBackend().call("Never push to main on Fridays.")
    assert classify_attempt(result, ctx()).outcome == "ok"


def test_backend_missing_outcome_is_free_halt() -> None:
    out = backend_missing_outcome("model binary not on PATH: claude")
    assert (out.outcome, out.entries, out.disposition) == ("fail_backend_missing", 0, "halt")


@pytest.mark.parametrize(
    "mode",
    ["ok", "empty", "prose", "zero_turns", "is_error", "max_turns", "too_long", "quota_warning"]
    + ["stderr_429", "exit124", "garbage", "no_output"],
)
def test_free_outcomes_cost_zero_paid_cost_one(tmp_path: Path, mode: str) -> None:
    out = classify_attempt(run_stub(tmp_path, mode), ctx())
    assert out.entries == (0 if out.outcome in FREE else 1)
    assert out.disposition in {"ok", "done", "retry", "poison", "quarantine", "halt"}
    assert out.writer_class in {"valid", "prose", "idle", "malformed", "poisoned"}


def test_timeout_with_partial_fragment_is_the_timeout_path(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {"STUB_CLAUDE_MODE": "sleep", "STUB_CLAUDE_SLEEP": "600", "STUB_CLAUDE_PARTIAL": "{"}
    # The timeout only has to outlast the stub's start-up (it prints the fragment first);
    # 0.5 s raced a loaded machine's interpreter start. The stub then sleeps far longer.
    result = ClaudeCliBackend(str(STUB), "m", str(cwd), 5, extra_env=env).call("p")
    assert result.timed_out and result.raw_stdout == "{"
    out = classify_attempt(result, ctx())
    assert (out.outcome, out.entries, out.disposition) == ("poison_timeout_exit_124", 1, "poison")
    retry = classify_attempt(result, ctx(timeout_retries=0))
    assert retry.outcome == "fail_no_output_exit_124" and "partial stdout" in retry.detail


@pytest.mark.parametrize(
    ("disposition", "state", "stage", "run_at", "dispatch", "terminal"),
    [
        ("ok", "queued", "add", "now", "add", False),
        ("retry", "retrying", None, "backoff", "write", False),
        ("halt", "halted", None, None, None, False),
        ("defer", "deferred", None, "retry_after", "write", False),
        ("done", "done", None, None, None, True),
        ("quarantine", "quarantined", None, None, None, True),
        ("poison", "poisoned", None, None, None, True),
        ("no-such-disposition", "poisoned", None, None, None, True),
    ],
)
def test_each_disposition_moves_the_job_to_one_state(
    disposition, state, stage, run_at, dispatch, terminal
) -> None:
    move = job_move(disposition)
    assert (move.state, move.stage, move.run_at, move.dispatch, move.terminal) == (
        state,
        stage,
        run_at,
        dispatch,
        terminal,
    )
    assert move.counts_failure == (disposition == "retry")
    assert move.sets_halt == (disposition == "halt")


def test_the_move_table_covers_every_disposition_an_attempt_can_have() -> None:
    assert set(DISPOSITION_MOVES) == {
        "ok",
        "done",
        "retry",
        "poison",
        "quarantine",
        "halt",
        "defer",  # an API writer's 429/529: free, until retry-after
    }


def test_error_kinds_report_halts_poisons_and_paid_partials_but_not_success() -> None:
    assert error_kind("fail_backend_missing") == ("drain_unknown_command", "error")
    assert error_kind("partial_max_turns") == ("drain_max_turns_partial", "warn")
    assert error_kind("ok") is None and error_kind("fail_exit_1") is None
    assert all(sev in ("warn", "error") for _, sev in ERROR_KINDS.values())
