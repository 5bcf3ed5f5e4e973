"""The gate (SPEC-drain §1.4, §9.5 tests 41–47, §10 B4 B16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import transcripts_dir

from reflect_jobs.cascade import detect_signals, gate
from reflect_jobs.markers import CHILD_MARKER
from reflect_jobs.transcripts import UnreadableTranscript, read_transcript


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def msg(role: str, content: object) -> dict:
    return {"type": role, "message": {"role": role, "content": content}}


def verdict(path: Path):
    t = read_transcript(path)
    return gate(t, detect_signals(t.turns))


def test_reflect_on_reflect_is_skipped(tmp_path: Path) -> None:  # 41
    recs = [
        msg("user", "<command-name>reflect</command-name>\nProcess the transcript at: /x.jsonl"),
        msg("assistant", "No, never use var. The root cause was X."),
    ]
    v = verdict(write(tmp_path / "r.jsonl", recs))
    assert (v.action, v.reason) == ("skip", "reflect_on_reflect")


def test_our_child_marker_is_skipped_even_with_signals(tmp_path: Path) -> None:  # B4
    recs = [msg("user", f"{CHILD_MARKER}\nNever use var. I already told you.")]
    assert verdict(write(tmp_path / "c.jsonl", recs)).reason == "reflect_on_reflect"


def test_clean_chat_is_no_signal(tmp_path: Path) -> None:  # 42, 30
    recs = [
        msg("user", "Summarize the attached document in three bullet points."),
        msg("assistant", "It covers weather, travel, cooking."),
    ]
    v = verdict(write(tmp_path / "clean.jsonl", recs))
    assert (v.action, v.reason) == ("skip", "no_signal")


def test_marker_in_ninth_user_record(tmp_path: Path) -> None:  # 43
    recs = []
    for i in range(8):
        recs += [msg("user", f"warm-up {i}"), msg("assistant", "ok")]
    recs.append(msg("user", "/reflect\nProcess the transcript at: /tmp/t.jsonl"))
    assert verdict(write(tmp_path / "w.jsonl", recs)).reason == "reflect_on_reflect"


def test_human_slash_reflect_is_reflected(tmp_path: Path) -> None:  # 44
    line = "/reflect later, but first: never use var here, the root cause was a missing index."
    v = verdict(write(tmp_path / "h.jsonl", [msg("user", line)]))
    assert (v.action, v.reason) == ("reflect", "has_signal")


def test_signal_transcript_reflects(tmp_path: Path) -> None:  # 45
    recs = [msg("user", "Fix the bug."), msg("user", "No, that's wrong. Never use a bare except.")]
    assert verdict(write(tmp_path / "s.jsonl", recs)).action == "reflect"


def test_missing_file_is_unreadable_not_silently_skipped(tmp_path: Path) -> None:  # 46
    # The original failed open ("reflect") and let the drain drop it as stale later; here
    # the reader says why, and the capture/prepare task decides (stale, no model call).
    with pytest.raises(UnreadableTranscript, match="not found"):
        verdict(tmp_path / "missing.jsonl")


def test_tool_blocks_with_signal_words_do_not_trip_the_gate(tmp_path: Path) -> None:  # 47
    recs = [
        msg("user", "Summarize the file."),
        msg(
            "assistant",
            [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"cmd": "echo wrong"}},
            ],
        ),
        msg(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": "wrong! never do that; error fixed by X; root cause was Y",
                }
            ],
        ),
        msg("assistant", "It covers weather."),
    ]
    assert verdict(write(tmp_path / "tools.jsonl", recs)).reason == "no_signal"


@pytest.mark.parametrize(
    "name",
    ["stop-hook-fast-path-clean.jsonl", "hello-world-script.jsonl", "coverage-test-fix.jsonl"],
)
def test_plain_real_sessions_are_no_signal(name: str) -> None:  # B16
    assert verdict(transcripts_dir() / name).reason == "no_signal"
