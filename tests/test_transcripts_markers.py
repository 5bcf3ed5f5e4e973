"""A BOM keeps its first record; machine markers count only where machines write them (item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transcript_records import (
    cc_assistant,
    cc_tool_result,
    cc_user,
    cp,
    cx_meta,
    cx_typed,
    write_jsonl,
)

from reflect_jobs.cascade import detect_signals, gate
from reflect_jobs.markers import CHILD_MARKER
from reflect_jobs.transcripts import read_transcript


def _bom_file(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in records).encode())
    return path


@pytest.mark.parametrize(
    ("records", "first"),
    [
        ([cc_user("Never use var."), cc_assistant("Ok.")], "Never use var."),
        ([cx_meta(originator="codex_exec"), *cx_typed("hi")], None),
        ([cp("user.message", {"content": "Never use var."})], "Never use var."),
    ],
    ids=["claude", "codex", "copilot"],
)
def test_bom_on_first_line_keeps_the_first_record(
    tmp_path: Path, records: list[dict], first: str | None
) -> None:
    t = read_transcript(_bom_file(tmp_path / "bom.jsonl", records))
    assert t.malformed_lines == 0 and t.records == len(records)
    if first is None:  # the first record is Codex's session_meta: it must still be honoured
        assert "codex_exec" in t.not_interactive
    else:
        assert t.turns[0].text == first


def test_bom_alone_on_the_first_line_is_not_a_malformed_record(tmp_path: Path) -> None:
    path = tmp_path / "bom-line.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n" + (json.dumps(cc_user("Never use var.")) + "\n").encode())
    t = read_transcript(path)
    assert (t.malformed_lines, t.records, t.turns[0].text) == (0, 1, "Never use var.")


@pytest.mark.parametrize(
    "text",
    [
        "Please process the transcript at: logs/run.jsonl and never drop the header.",
        "process the transcript at: /tmp/x.jsonl — no, never use var there",
        "Here is what the plugin sends:\n/reflect\nProcess the transcript at: /x.jsonl\n"
        "No, never use var.",
        f"quote of our prompt: {CHILD_MARKER} — no, never use var",
        "the tags were <command-name>/reflect</command-name>; no, never use var",
    ],
)
def test_person_writing_a_marker_phrase_is_a_real_session(tmp_path: Path, text: str) -> None:
    t = read_transcript(write_jsonl(tmp_path / "p.jsonl", [cc_user(text)]))
    assert not t.child_session
    assert gate(t, detect_signals(t.turns)).reason == "has_signal"


@pytest.mark.parametrize(
    "text",
    [
        f"{CHILD_MARKER}\nYou extract learnings. Never use var.",
        "  /reflect\nProcess the transcript at: /x.jsonl",
        "<command-message>reflect is running…</command-message>\n"
        "<command-name>/reflect</command-name>\n"
        "<command-args>Process the transcript at: /x.jsonl</command-args>",
    ],
)
def test_machine_written_markers_still_skip(tmp_path: Path, text: str) -> None:
    t = read_transcript(write_jsonl(tmp_path / "m.jsonl", [cc_user(text), cc_user("No.")]))
    assert gate(t, detect_signals(t.turns)).reason == "reflect_on_reflect"


def test_marker_inside_a_tool_result_is_not_a_marker(tmp_path: Path) -> None:
    # The agent reading our own prompt file is not one of our runs.
    recs = [
        cc_user("Show me the writer prompt. No, never use var there."),
        cc_tool_result(f"{CHILD_MARKER}\nYou extract learnings…"),
    ]
    assert not read_transcript(write_jsonl(tmp_path / "t.jsonl", recs)).child_session


def test_codex_legacy_prompt_in_event_is_a_marker(tmp_path: Path) -> None:
    recs = [cx_meta(), *cx_typed("/reflect\nProcess the transcript at: /x.jsonl")]
    assert read_transcript(write_jsonl(tmp_path / "r.jsonl", recs)).child_session
