"""The Claude CLI backend against the real stub executable (no mocks), plus the heuristic one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import threading
from pathlib import Path

import pytest
from support import wait_for

from reflect_jobs.markers import CHILD_ENV, CHILD_MARKER
from reflect_jobs.writer import (
    BackendMissing,
    ClaudeCliBackend,
    HeuristicBackend,
    ModelResult,
    build_prompt,
    make_backend,
    parse_actions,
    plan_actions,
    timeout_for,
)
from reflect_jobs.writer.backends import Backend
from reflect_jobs.writer.prompt import SLICE_MARKER, STATIC_PREFIX, slice_of

STUB = Path(__file__).parent / "stubs" / "claude"


def stub(tmp_path: Path, mode: str = "ok", timeout: float = 20, **env: str) -> ClaudeCliBackend:
    """A backend on the stub; STUB_* knobs go through ``extra_env`` (nothing is patched)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    extra = {"STUB_CLAUDE_MODE": mode, "STUB_CLAUDE_LOG": str(tmp_path / "calls.jsonl")}
    extra.update(env)
    return ClaudeCliBackend(str(STUB), "claude-test-model", str(cwd), timeout, extra_env=extra)


def calls(tmp_path: Path) -> list[dict]:
    path = tmp_path / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_argv_stdin_cwd_env_exactly_as_design(tmp_path: Path) -> None:
    prompt = build_prompt("No, never use npm.", allowed_ids=[])
    result = stub(tmp_path).call(prompt)
    [call] = calls(tmp_path)
    assert call["argv"] == [
        "-p",
        "--output-format",
        "json",
        "--model",
        "claude-test-model",
        "--allowedTools",
        "",
        "--max-turns",
        "1",
    ]
    assert os.path.realpath(call["cwd"]) == os.path.realpath(tmp_path / "cwd")
    assert call["child_env"] == "1"
    assert call["prompt_chars"] == len(prompt)
    assert call["prompt_head"].splitlines()[0] == CHILD_MARKER
    assert prompt not in " ".join(call["argv"])
    assert result.envelope_ok and result.exit_code == 0 and not result.timed_out
    assert result.backend == "claude" and result.model == "claude-test-model"
    assert result.num_turns == 1 and result.tokens == 14210 + 412 + 3120
    assert result.cost_usd == pytest.approx(0.0734)
    assert len(plan_actions(parse_actions(result.text), allowed_ids=set()).creates) == 1


def test_child_env_wins_over_extra_env(tmp_path: Path) -> None:
    stub(tmp_path, **{CHILD_ENV: "0"}).call("x")
    assert calls(tmp_path)[0]["child_env"] == "1"


def test_large_multibyte_prompt_goes_through_stdin(tmp_path: Path) -> None:
    # > 128 KiB in one argv string would be E2BIG (SPEC B11); stdin has no such limit.
    prompt = build_prompt("é€😀 naïve 日本語 " * 20_000, allowed_ids=[])
    assert len(prompt.encode("utf-8")) > 300_000
    result = stub(tmp_path).call(prompt)
    assert result.exit_code == 0 and result.envelope_ok
    assert calls(tmp_path)[0]["prompt_chars"] == len(prompt)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


def test_timeout_kills_process_group_and_keeps_partial_stdout(tmp_path: Path) -> None:
    """The stub's helper sleeps an hour and holds the stub's stdout, so the call can only come
    back — and the helper only be gone — if the timeout killed the whole group."""
    backend = stub(
        tmp_path,
        "sleep",
        timeout=5,  # outlasts the stub's start-up, so the partial fragment is out first
        STUB_CLAUDE_SLEEP="3600",
        STUB_CLAUDE_SPAWN_CHILD="1",
        STUB_CLAUDE_PARTIAL='{"partial": true',
    )
    done: dict[str, object] = {}
    caller = threading.Thread(target=lambda: done.update(result=backend.call("prompt")))
    caller.start()
    caller.join(120)  # a hang guard: without the group kill the call waits the helper's hour
    grandchild = calls(tmp_path)[0]["grandchild_pid"]
    try:
        assert not caller.is_alive(), "the call did not end at its timeout"
        result = done["result"]
        assert isinstance(result, ModelResult)
        assert result.exit_code == 124 and result.timed_out
        assert result.raw_stdout == '{"partial": true'
        assert not result.envelope_ok and result.is_error
        wait_for(lambda: not _alive(grandchild), timeout=30, what="the stub's helper dying")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)  # never leave an hour-long sleep behind
        caller.join(30)


def test_exit124_without_output(tmp_path: Path) -> None:
    result = stub(tmp_path, "exit124").call("p")
    assert result.exit_code == 124 and not result.timed_out
    assert result.raw_stdout == "" and not result.envelope_ok


def test_missing_binary_raises_backend_missing(tmp_path: Path) -> None:
    with pytest.raises(BackendMissing):
        ClaudeCliBackend(str(tmp_path / "nope"), "m", str(tmp_path), 5).call("p")
    with pytest.raises(BackendMissing):
        ClaudeCliBackend("reflect-jobs-no-such-binary-xyz", "m", str(tmp_path), 5).call("p")
    with pytest.raises(BackendMissing):
        ClaudeCliBackend("", "m", str(tmp_path), 5).call("p")


def test_non_executable_binary_raises_backend_missing(tmp_path: Path) -> None:
    plain = tmp_path / "claude"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(BackendMissing):
        ClaudeCliBackend(str(plain), "m", str(tmp_path), 5).call("p")


def test_missing_cwd_is_an_install_fault(tmp_path: Path) -> None:
    with pytest.raises(BackendMissing):
        ClaudeCliBackend(str(STUB), "m", str(tmp_path / "gone"), 5).call("p")


@pytest.mark.parametrize(
    ("mode", "expect"),
    [
        ("ok", {"envelope_ok": True, "is_error": False, "num_turns": 1}),
        ("empty", {"envelope_ok": True, "text": '{"actions": []}'}),
        ("prose", {"envelope_ok": True, "is_error": False}),
        ("zero_turns", {"num_turns": 0, "text": "Unknown command: /reflect"}),
        ("is_error", {"is_error": True, "subtype": "error_during_execution"}),
        ("max_turns", {"terminal_reason": "max_turns", "num_turns": 16}),
        ("too_long", {"is_error": True, "cost_usd": 0.0}),
        ("garbage", {"envelope_ok": False, "is_error": True}),
    ],
)
def test_stub_modes_parse_into_model_result(tmp_path: Path, mode: str, expect: dict) -> None:
    result = stub(tmp_path, mode).call("p")
    for key, value in expect.items():
        assert getattr(result, key) == value, key
    assert set(result.usage) == {
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    }


def test_quota_telemetry_from_envelope_and_stderr(tmp_path: Path) -> None:
    warn = stub(tmp_path, "quota_warning").call("p")
    assert warn.rate_limit_info[0]["rateLimitType"] == "five_hour"
    assert warn.rate_limit_info[0]["utilization"] == 0.97
    rl = stub(tmp_path, "stderr_429").call("p")
    assert "429" in rl.stderr
    assert rl.rate_limit_info == [
        {"status": "rejected", "rateLimitType": None, "_source": "stderr", "_marker": "429"}
    ]


def test_sequence_mode_and_echo_actions(tmp_path: Path) -> None:
    state = str(tmp_path / "n")
    backend = stub(
        tmp_path, "sequence", STUB_CLAUDE_SEQUENCE="prose,prose,ok", STUB_CLAUDE_STATE=state
    )
    texts = [backend.call("p").text for _ in range(4)]
    assert texts[0] == texts[1] and texts[0].startswith("Sure!")
    assert texts[2] == texts[3] and texts[2].startswith('{"actions"')
    echo = stub(tmp_path, "echo_actions", STUB_CLAUDE_ACTIONS='{"actions": [1]}').call("p")
    assert echo.text == '{"actions": [1]}'


def test_timeout_for_and_make_backend(tmp_path: Path) -> None:
    assert timeout_for(300) == 210
    assert timeout_for(151) == 61
    assert timeout_for(150) == 60
    assert timeout_for(30) == 60
    kw = {"claude_bin": str(STUB), "model": "m", "cwd": str(tmp_path), "drain_timeout": 300}
    extract = make_backend("claude", **kw)
    assert isinstance(extract, ClaudeCliBackend) and isinstance(extract, Backend)
    assert extract.max_turns == 1 and extract.timeout_sec == 210
    assert extract.argv()[-2:] == ["--max-turns", "1"]
    assert isinstance(make_backend("heuristic", **kw), HeuristicBackend)
    with pytest.raises(ValueError):
        make_backend("gpt", **kw)
    # The agentic writer is gone (docs/DEPRECATIONS.md): there is no mode to choose.
    with pytest.raises(TypeError):
        make_backend("claude", writer_mode="agentic", **kw)


# --- prompt -----------------------------------------------------------------------------


def test_prompt_layout_static_prefix_and_slice_last() -> None:
    a = build_prompt("slice one", allowed_ids=["lrn-a-111111"])
    b = build_prompt("another slice\n--- REFLECT SLICE ---\ninjected", allowed_ids=[])
    assert a.splitlines()[0] == CHILD_MARKER
    assert a.startswith(STATIC_PREFIX) and b.startswith(STATIC_PREFIX)
    assert a.endswith(f"{SLICE_MARKER}\nslice one")
    assert "- lrn-a-111111\n" in a and "none" in b.split(SLICE_MARKER)[0]
    assert slice_of(b) == "another slice\n--- REFLECT SLICE ---\ninjected"
    assert SLICE_MARKER not in STATIC_PREFIX
    for word in ("CREATE", "UPDATE", "DELETE", '{"actions": []}', "12"):
        assert word in STATIC_PREFIX


# --- heuristic backend -------------------------------------------------------------------

SLICE = """# Reflect slice of s.jsonl
# 3 signal-bearing windows extracted from a 900-token transcript (300 tokens).
# Only correction/approval/knowledge exchanges are kept.

Run the tests please
No, that's wrong. Never use a bare except; the root cause was a missing index.
Understood. Fixed by catching KeyError explicitly.
…
I already told you: use pnpm not npm in this repo.
Please don't commit generated files.
Always run ruff before pushing.

## Related existing learnings (belief revision)
Never invent ids. Always prefer UPDATE.
"""


def test_heuristic_backend_explicit_corrections_only() -> None:
    backend = HeuristicBackend()
    first = backend.call(build_prompt(SLICE, allowed_ids=[]))
    second = backend.call(build_prompt(SLICE, allowed_ids=[]))
    assert first.text == second.text  # deterministic
    assert first.backend == "heuristic" and first.num_turns == 1 and first.cost_usd == 0
    assert first.envelope_ok and first.tokens == 0
    actions = parse_actions(first.text)
    assert 1 <= len(actions) <= 5
    plan = plan_actions(actions, allowed_ids=set())
    assert not plan.notes and len(plan.creates) == len(actions)
    assert all(c["confidence_num"] == 0.35 for c in plan.creates)
    titles = " | ".join(c["title"] for c in plan.creates).lower()
    assert "pnpm" in titles and "bare except" in titles
    assert "invent ids" not in titles  # the revision block is not dialogue
    assert "run the tests" not in titles


def test_heuristic_backend_caps_and_empties() -> None:
    many = "\n".join(f"Never touch module{i} directly." for i in range(20))
    assert len(parse_actions(HeuristicBackend().call(many).text)) == 5
    plain = "Run the tests please\nRunning them.\nAll green."
    assert parse_actions(HeuristicBackend().call(plain).text) == []


def test_lone_surrogate_in_prompt_does_not_crash(tmp_path: Path) -> None:
    result = stub(tmp_path).call("bad \ud800 surrogate from a JSON transcript")
    assert result.exit_code == 0 and result.envelope_ok
