"""Reflection event lines: the schema, redaction on the way in, the append and its modes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from reflect_jobs.reflections.events import (
    EventError,
    append_event,
    host_name,
    make_event,
    parse_line,
    validate,
)
from reflect_jobs.reflections.index import ReflectionIndex

UID = "0123456789abcdef"
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_every_string_is_redacted_before_it_is_written(tmp_path: Path) -> None:
    log = tmp_path / "home" / "reflections" / "alpha.jsonl"
    event = make_event(
        "add",
        UID,
        host="alpha",
        by="reflector",
        kind="action",
        title=f"rotate {GH_TOKEN}",
        body="db password=hunter2hunter2 in .env",
        session="s-1",
    )
    append_event(log, event)
    append_event(log, make_event("done", UID, host="alpha", by="person", note=f"used {GH_TOKEN}"))
    text = log.read_text()
    assert GH_TOKEN not in text and "hunter2hunter2" not in text
    assert "[REDACTED:github_token]" in text and "[REDACTED:password]" in text
    assert [parse_line(line)["op"] for line in text.splitlines()] == ["add", "done"]


def test_the_log_is_0600_in_0700_directories_and_existing_dirs_keep_their_mode(
    tmp_path: Path,
) -> None:
    tmp_path.chmod(0o755)
    log = tmp_path / "a" / "b" / "reflections" / "alpha.jsonl"
    append_event(log, make_event("add", UID, host="alpha", by="person", kind="note", title="t"))
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    for d in (tmp_path / "a", tmp_path / "a" / "b", log.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755


def test_a_torn_last_line_cannot_swallow_the_next_append(tmp_path: Path) -> None:
    log = tmp_path / "reflections" / "alpha.jsonl"
    append_event(log, make_event("add", UID, host="alpha", by="person", kind="action", title="A"))
    with log.open("ab") as fh:  # a writer killed in the middle of its line
        fh.write(b'{"v":1,"op":"edit","ti')
    index = ReflectionIndex(tmp_path / "index.db")
    index.refresh("r", log.parent)
    append_event(log, make_event("done", UID, host="alpha", by="person", note="ok"))
    stats = index.refresh("r", log.parent)
    assert stats.bad_lines == 1  # the torn line, on its own line, skipped
    assert [i.base for i in index.items("r")] == ["done"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"v": 2}, "version"),
        ({"op": "zap"}, "unknown op"),
        ({"uid": "XYZ"}, "uid"),
        ({"ts": "yesterday"}, "ISO 8601"),
        ({"by": "robot"}, "by must be"),
        ({"kind": "chore"}, "kind must be"),
        ({"title": "   "}, "title must not be empty"),
        ({"title": "x" * 301}, "longer than"),
    ],
)
def test_malformed_events_are_refused_with_the_reason(raw: dict, message: str) -> None:
    good = {
        "v": 1,
        "eid": "00000000000000ff",
        "ts": "2026-12-01T10:00:00Z",
        "host": "alpha",
        "op": "add",
        "uid": UID,
        "by": "person",
        "kind": "action",
        "title": "A",
    }
    validate(good)
    with pytest.raises(EventError, match=message):
        validate({**good, **raw})


def test_done_and_drop_need_evidence_and_edit_needs_a_change() -> None:
    for op in ("done", "drop"):
        with pytest.raises(EventError, match="needs a note"):
            make_event(op, UID, host="alpha", by="person", note="  ")
    with pytest.raises(EventError, match="title or a body"):
        make_event("edit", UID, host="alpha", by="person")


def test_lines_from_other_tools_are_read_leniently() -> None:
    line = json.dumps(
        {
            "v": 1,
            "eid": "00000000000000ff",
            "ts": "2026-12-01T10:00:00+01:00",
            "host": "x",
            "op": "add",
            "uid": UID,
            "kind": "idea",
            "title": "  two   spaces ",
            "extra": 1,
        }
    )
    event = parse_line(line)
    assert event["ts"] == "2026-12-01T09:00:00.000000Z"
    assert event["by"] == "person" and event["title"] == "two spaces" and "extra" not in event
    with pytest.raises(EventError, match="not a JSON line"):
        parse_line("{nope")


def test_host_name_is_file_safe() -> None:
    assert host_name({"REFLECT_HOST": "my laptop/../x"}) == "my-laptop-..-x"
    assert host_name({"REFLECT_HOST": "beta"}) == "beta"
    assert host_name({"REFLECT_HOST": "///"}) == "host"


def test_a_reader_keeps_long_lines_another_tool_wrote() -> None:
    line = json.dumps(
        {
            "v": 1,
            "eid": "00000000000000ff",
            "ts": "2026-12-01T10:00:00Z",
            "host": "x",
            "op": "add",
            "uid": UID,
            "kind": "note",
            "title": "t" * 400,
            "body": "b" * 70_000,
        }
    )
    event = parse_line(line)
    assert len(event["title"]) == 300 and len(event["body"]) == 70_000
    with pytest.raises(EventError, match="longer than"):
        validate(json.loads(line))
