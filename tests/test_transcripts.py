"""Transcript readers (SPEC-drain §2.1–2.3) and their bad-input behaviour (SPEC-drain §9.4/9.5)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from reflect_jobs.markers import CHILD_MARKER
from reflect_jobs.transcripts import (
    Transcript,
    UnreadableTranscript,
    detect_format,
    read_transcript,
)

DATA = Path(__file__).parent / "data" / "transcripts"
REAL = sorted((DATA / "claude-code").glob("*.jsonl"))


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def user(content: object, **extra: object) -> dict:
    return {"type": "user", "message": {"role": "user", "content": content}, **extra}


def assistant(text: str) -> dict:
    return {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }


def dialogue(t: Transcript) -> str:
    return "\n".join(turn.text for turn in t.turns)


# --- formats -------------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_claude_transcripts_parse_to_clean_dialogue(path: Path) -> None:
    t = read_transcript(path)
    assert t.format == "claude"
    assert t.malformed_lines == 0
    assert t.total_lines == sum(1 for _ in path.open())
    assert t.turns and t.turns[0].role == "user"
    assert [turn.index for turn in t.turns] == list(range(len(t.turns)))
    text = dialogue(t)
    assert "Stop hook feedback" not in text  # isMeta records are harness text
    assert "tool_use_id" not in text and "toolu_" not in text
    assert not t.child_session
    assert t.dropped_chars == 0


def test_claude_spec_example_exact_dialogue() -> None:
    t = read_transcript(DATA / "claude-spec-example.jsonl")
    assert dialogue(t) == (
        "Run the tests please\nRunning them.\n"
        "No, that's wrong. Never use a bare except; the root cause was a missing index.\n"
        "Understood. Fixed by catching KeyError explicitly."
    )
    assert [turn.role for turn in t.turns] == ["user", "assistant", "user", "assistant"]
    assert t.turns[0].timestamp == "2026-07-15T10:00:00Z"


def test_codex_rollout_reads_messages_once_and_skips_preambles() -> None:
    t = read_transcript(DATA / "codex-rollout.jsonl")
    assert t.format == "codex"
    assert [(x.role, x.text) for x in t.turns] == [
        ("user", "No, never use a bare except."),
        ("assistant", "Fixed by catching KeyError."),
    ]
    assert t.turns[0].timestamp == "2026-07-01T10:00:01Z"


def test_copilot_events_read() -> None:
    t = read_transcript(DATA / "copilot-events.jsonl")
    assert t.format == "copilot"
    assert [(x.role, x.text) for x in t.turns] == [
        ("user", "No, never use a bare except."),
        ("assistant", "Fixed by catching KeyError."),
    ]


def test_harness_hint_picks_parser_and_rejects_unknown(tmp_path: Path) -> None:
    assert read_transcript(DATA / "codex-rollout.jsonl", harness="codex").format == "codex"
    # Forcing the wrong parser finds no usable record → unreadable, not a silent empty read.
    with pytest.raises(UnreadableTranscript):
        read_transcript(DATA / "codex-rollout.jsonl", harness="copilot")
    with pytest.raises(ValueError):
        read_transcript(DATA / "codex-rollout.jsonl", harness="emacs")


def test_detect_format() -> None:
    assert detect_format([{"type": "session_meta", "payload": {}}]) == "codex"
    assert detect_format([{"type": "session.start", "data": {}}]) == "copilot"
    assert detect_format([{"message": {"role": "user", "content": "x"}}]) == "claude"
    assert detect_format([{"weird": 1}, {"type": "queue-operation"}]) == "claude"
    assert detect_format([]) == "claude"


def test_sniff_waits_for_a_decisive_record(tmp_path: Path) -> None:
    recs = [{"junk": i} for i in range(3)] + [
        {"type": "user.message", "data": {"content": "Never commit secrets."}}
    ]
    t = read_transcript(write_jsonl(tmp_path / "e.jsonl", recs))
    assert t.format == "copilot" and t.malformed_lines == 3
    assert dialogue(t) == "Never commit secrets."


# --- noise ---------------------------------------------------------------------------


def test_machine_blocks_dropped_but_command_args_kept(tmp_path: Path) -> None:
    recs = [
        user(
            "<command-message>review is running…</command-message>\n"
            "<command-name>/review</command-name>\n"
            "<command-args>never use var in this file</command-args>"
        ),
        user("<local-command-stdout>ERROR: wrong, never do that</local-command-stdout>"),
        user("<system-reminder>You must never reveal this.</system-reminder>"),
        user("<reflect-recall>Known rule: never use var</reflect-recall>Please continue."),
        user("[Request interrupted by user for tool use]"),
        user("Caveat: the messages below were generated by the user.", isMeta=True),
        assistant("Ok."),
    ]
    t = read_transcript(write_jsonl(tmp_path / "n.jsonl", recs))
    # The interruption is feedback (issue item 8): kept, normalised, weighed by the detector.
    assert [x.text for x in t.turns] == [
        "never use var in this file",
        "Please continue.",
        "[Request interrupted by user]",
        "Ok.",
    ]


def test_tool_blocks_never_become_dialogue(tmp_path: Path) -> None:
    recs = [
        user("Summarize the file."),
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t", "name": "Bash", "input": {"c": "wrong"}},
                    {"type": "image", "source": {}},
                ],
            },
        },
        user([{"type": "tool_result", "tool_use_id": "t", "content": "never: root cause"}]),
        assistant("It covers weather."),
    ]
    t = read_transcript(write_jsonl(tmp_path / "t.jsonl", recs))
    assert dialogue(t) == "Summarize the file.\nIt covers weather."


# --- child sessions (SPEC-drain §1.4, §10 B4) ------------------------------------------------


def test_child_marker_detected(tmp_path: Path) -> None:
    t = read_transcript(write_jsonl(tmp_path / "c.jsonl", [user(f"{CHILD_MARKER}\nslice…")]))
    assert t.child_session


@pytest.mark.parametrize(
    "content",
    [
        "<command-name>reflect</command-name>\nProcess the transcript at: /x.jsonl",
        "<command-message>reflect</command-message>\n<command-name>/reflect</command-name>",
        "/REFLECT\nPROCESS THE TRANSCRIPT AT: /tmp/a.jsonl",
    ],
)
def test_legacy_markers_detected(tmp_path: Path, content: str) -> None:
    t = read_transcript(write_jsonl(tmp_path / "c.jsonl", [user(content), assistant("ok")]))
    assert t.child_session


def test_queue_operation_content_is_scanned(tmp_path: Path) -> None:
    recs = [
        {"type": "queue-operation", "operation": "enqueue", "content": f"{CHILD_MARKER} go"},
        user("hello"),
    ]
    assert read_transcript(write_jsonl(tmp_path / "q.jsonl", recs)).child_session


def test_marker_in_ninth_user_record_still_detected(tmp_path: Path) -> None:
    recs = []
    for i in range(8):
        recs += [user(f"warm-up {i}"), assistant("ok")]
    recs.append(user("<command-name>/reflect</command-name>"))
    assert read_transcript(write_jsonl(tmp_path / "w.jsonl", recs)).child_session


def test_marker_after_scan_window_ignored(tmp_path: Path) -> None:
    recs = [assistant(f"line {i}") for i in range(61)] + [user(CHILD_MARKER)]
    assert not read_transcript(write_jsonl(tmp_path / "late.jsonl", recs)).child_session


def test_human_slash_reflect_is_not_a_child_session(tmp_path: Path) -> None:
    line = "/reflect later, but first: never use var here, the root cause was a missing index."
    t = read_transcript(write_jsonl(tmp_path / "h.jsonl", [user(line), assistant("Sure.")]))
    assert not t.child_session
    assert t.turns[0].text == line


# --- bad input ------------------------------------------------------------------------


def test_truncated_and_non_json_lines_are_counted(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    good = json.dumps(user("Never use var."))
    p.write_text(f'{good}\n{{"type": "user", "mess\nnot json at all\n[1, 2]\n\n{good[:30]}')
    t = read_transcript(p)
    assert [x.text for x in t.turns] == ["Never use var."]
    assert t.malformed_lines == 4  # truncated, prose, wrong shape, partial last line
    assert t.total_lines == 6


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"\n\n   \n", "empty file"),
        (b"hello\nworld\n", "no JSON records"),
        (b'[1, 2]\n{"foo": "bar"}\n"str"\n', "unrecognised shape"),
    ],
)
def test_unreadable_files_raise_with_reason(tmp_path: Path, content: bytes, reason: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    with pytest.raises(UnreadableTranscript, match=reason):
        read_transcript(p)


def test_binary_garbage_is_unreadable(tmp_path: Path) -> None:
    p = tmp_path / "bin.jsonl"
    p.write_bytes(os.urandom(64 * 1024) + b"\x00\xff\xfe\n" + os.urandom(1024))
    with pytest.raises(UnreadableTranscript, match="binary data"):
        read_transcript(p)


def test_directory_and_vanished_file(tmp_path: Path) -> None:
    with pytest.raises(UnreadableTranscript, match="not a file"):
        read_transcript(tmp_path)
    with pytest.raises(UnreadableTranscript, match="not found"):
        read_transcript(tmp_path / "gone.jsonl")


def test_file_growing_while_read_does_not_crash(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "live.jsonl", [user("Never use var."), assistant("ok")] * 2000)
    stop = threading.Event()

    def appender() -> None:
        with p.open("a") as fh:
            while not stop.is_set():
                fh.write(json.dumps(assistant("more")) + "\n" + '{"type": "us')
                fh.flush()
                time.sleep(0.001)

    thread = threading.Thread(target=appender)
    thread.start()
    try:
        for _ in range(5):
            t = read_transcript(p)
            assert t.turns[0].text == "Never use var."
    finally:
        stop.set()
        thread.join()


# --- memory cap -----------------------------------------------------------------------


def test_cap_keeps_head_quarter_and_recent_tail(tmp_path: Path) -> None:
    recs = [user("FIRST task statement")]
    recs += [assistant(f"middle filler line number {i:04d}") for i in range(500)]
    recs.append(user("LAST: never use var"))
    t = read_transcript(write_jsonl(tmp_path / "big.jsonl", recs), max_chars=2_000)
    kept = sum(len(x.text) for x in t.turns)
    assert kept <= 2_000
    assert t.turns[0].text == "FIRST task statement"
    assert t.turns[-1].text == "LAST: never use var"
    assert t.dropped_chars > 0
    texts = [r["message"]["content"] for r in recs]
    assert kept + t.dropped_chars == sum(
        len(c) if isinstance(c, str) else len(c[0]["text"]) for c in texts
    )
    assert [x.index for x in t.turns] == list(range(len(t.turns)))


def test_single_giant_turn_is_cut_not_held(tmp_path: Path) -> None:
    recs = [user("start"), assistant("y" * 50_000 + " THE END")]
    t = read_transcript(write_jsonl(tmp_path / "g.jsonl", recs), max_chars=1_000)
    assert sum(len(x.text) for x in t.turns) <= 1_000
    assert t.turns[-1].text.endswith("THE END")
