"""Interruptions and tool rejections are weighed feedback on the turn they cut short (item 8)."""

from __future__ import annotations

from pathlib import Path

from transcript_records import (
    cc_assistant,
    cc_tool_result,
    cc_user,
    cx,
    cx_meta,
    cx_msg,
    cx_typed,
    write_jsonl,
)

from reflect_jobs.cascade import EmptyLedger, detect_signals, gate, prepare
from reflect_jobs.transcripts import read_transcript
from reflect_jobs.transcripts.noise import INTERRUPTED, REJECTED

REJECT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)
REJECT_WITH_REASON = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). To tell you how to proceed, "
    "the user said:\nuse pnpm instead of npm in this repo"
)


def _read(tmp_path: Path, recs: list[dict]):
    t = read_transcript(write_jsonl(tmp_path / "f.jsonl", recs))
    return t, detect_signals(t.turns)


def test_interruption_is_a_signal_of_the_interrupted_turn(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [
            cc_user("Clean up the build script."),
            cc_assistant("I'll delete the dist folder\nand rewrite the Makefile from scratch."),
            cc_user([{"type": "text", "text": "[Request interrupted by user for tool use]"}]),
        ],
    )
    assert t.turns[-1].text == INTERRUPTED
    (sig,) = signals
    assert sig.kind == "interruption" and sig.level == "MEDIUM" and sig.role == "user"
    lines = t.lines()
    assert lines[sig.line_number - 1] == "and rewrite the Makefile from scratch."
    assert sig.text.startswith(INTERRUPTED) and "Makefile" in sig.text


def test_interruption_alone_does_not_reflect(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [cc_user("Summarise the file."), cc_assistant("Reading it."), cc_user(INTERRUPTED)],
    )
    assert signals and gate(t, signals).reason == "no_signal"


def test_bare_rejection_is_feedback_but_not_enough_alone(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [
            cc_user("Tidy the repo."),
            cc_assistant("Removing the vendor dir."),
            cc_tool_result(REJECT),
        ],
    )
    last = t.turns[-1]
    assert (last.index, last.role, last.text, last.timestamp) == (2, "user", REJECTED, None)
    assert [s.kind for s in signals] == ["tool_rejection"]
    assert gate(t, signals).reason == "no_signal"


def test_rejection_reason_is_the_persons_words(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [
            cc_user("Install the deps."),
            cc_assistant("Running npm install."),
            cc_tool_result(REJECT_WITH_REASON),
        ],
    )
    assert t.turns[-1].text == f"{REJECTED}\nuse pnpm instead of npm in this repo"
    assert {s.kind for s in signals} == {"tool_rejection", "correction"}
    assert gate(t, signals).reason == "has_signal"
    out = prepare(t, EmptyLedger(), source_name="f.jsonl")
    assert out.action == "reflect"
    assert "Running npm install." in out.slice_text and REJECTED in out.slice_text


def test_feedback_with_a_spoken_correction_reflects(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [
            cc_user("Fix the test."),
            cc_assistant("Skipping the flaky test."),
            cc_user(INTERRUPTED),
            cc_user("No, never skip tests; fix the race instead."),
        ],
    )
    assert [s.kind for s in signals][0] == "interruption"
    assert gate(t, signals).reason == "has_signal"


def test_ordinary_tool_errors_stay_out(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [cc_user("Run it."), cc_tool_result("Error: wrong; never do that"), cc_assistant("Ok.")],
    )
    assert [x.text for x in t.turns] == ["Run it.", "Ok."] and signals == []


def test_codex_interrupted_turn_is_feedback(tmp_path: Path) -> None:
    t, signals = _read(
        tmp_path,
        [
            cx_meta(originator="codex_cli_rs"),
            *cx_typed("Refactor the cache."),
            cx_msg("assistant", "Rewriting the whole module."),
            cx("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        ],
    )
    assert t.turns[-1].text == INTERRUPTED and [s.kind for s in signals] == ["interruption"]
