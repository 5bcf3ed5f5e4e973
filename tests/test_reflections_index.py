"""The derived index: stat-first refresh, incremental reads, rereads, removal, damage."""

from __future__ import annotations

import os
import shutil
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reflect_jobs.reflections.events import append_event, make_event, new_hex
from reflect_jobs.reflections.index import ReflectionIndex

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def add(
    log: Path, title: str, *, host: str = "alpha", at: datetime = T0, kind: str = "action"
) -> str:
    uid = new_hex(title)
    append_event(
        log, make_event("add", uid, host=host, by="person", now=at, kind=kind, title=title)
    )
    return uid


def test_nothing_changed_reads_nothing_and_growth_reads_only_the_new_lines(tmp_path: Path) -> None:
    logs = tmp_path / "reflections"
    add(logs / "alpha.jsonl", "one")
    index = ReflectionIndex(tmp_path / "idx.db")
    first = index.refresh("r", logs)
    assert (first.changed, first.events) == (True, 1)
    again = index.refresh("r", logs)
    assert (again.changed, again.logs_read, again.events) == (False, 0, 0)
    add(logs / "alpha.jsonl", "two")
    grown = index.refresh("r", logs)
    assert (grown.logs_read, grown.events, grown.items) == (1, 1, 1)
    assert sorted(i.title for i in index.items("r")) == ["one", "two"]
    assert stat.S_IMODE((tmp_path / "idx.db").stat().st_mode) == 0o600


def test_a_log_replaced_by_a_longer_copy_is_read_from_the_offset(tmp_path: Path) -> None:
    """What a git pull does: a new inode whose first bytes are the old file."""
    logs = tmp_path / "reflections"
    add(logs / "beta.jsonl", "one", host="beta")
    index = ReflectionIndex(tmp_path / "idx.db")
    index.refresh("r", logs)
    other = tmp_path / "elsewhere" / "beta.jsonl"
    other.parent.mkdir()
    shutil.copy(logs / "beta.jsonl", other)
    add(other, "two", host="beta")
    os.replace(other, logs / "beta.jsonl")
    stats = index.refresh("r", logs)
    assert (stats.events, stats.items) == (1, 1)


def test_a_rewritten_log_is_reread_and_a_removed_log_forgets_its_items(tmp_path: Path) -> None:
    logs = tmp_path / "reflections"
    add(logs / "alpha.jsonl", "mine")
    add(logs / "beta.jsonl", "theirs", host="beta")
    index = ReflectionIndex(tmp_path / "idx.db")
    index.refresh("r", logs)
    (logs / "beta.jsonl").unlink()
    add(logs / "beta.jsonl", "rewritten", host="beta")
    index.refresh("r", logs)
    assert sorted(i.title for i in index.items("r")) == ["mine", "rewritten"]
    (logs / "beta.jsonl").unlink()
    index.refresh("r", logs)
    assert [i.title for i in index.items("r")] == ["mine"]


def test_ids_grow_when_a_synced_log_brings_a_colliding_uid(tmp_path: Path) -> None:
    logs = tmp_path / "reflections"
    append_event(
        logs / "alpha.jsonl",
        make_event("add", "abcd111100000000", host="alpha", by="person", kind="action", title="a"),
    )
    index = ReflectionIndex(tmp_path / "idx.db")
    index.refresh("r", logs)
    assert [i.id for i in index.items("r")] == ["#abcd"]
    append_event(
        logs / "beta.jsonl",
        make_event("add", "abcd222200000000", host="beta", by="person", kind="action", title="b"),
    )
    index.refresh("r", logs)
    assert sorted(i.id for i in index.items("r")) == ["#abcd1", "#abcd2"]
    assert len(index.by_prefix("r", "abcd")) == 2


def test_bad_lines_are_skipped_and_counted_never_fatal(tmp_path: Path) -> None:
    logs = tmp_path / "reflections"
    add(logs / "alpha.jsonl", "good")
    with (logs / "alpha.jsonl").open("a") as fh:
        fh.write('not json\n{"v": 1, "op": "add"}\n\xff\n')
    add(logs / "alpha.jsonl", "also good")
    index = ReflectionIndex(tmp_path / "idx.db")
    stats = index.refresh("r", logs)
    assert stats.bad_lines == 3 and index.bad_lines("r") == 3
    assert sorted(i.title for i in index.items("r")) == ["also good", "good"]


def test_a_damaged_index_file_is_rebuilt_from_the_logs(tmp_path: Path) -> None:
    logs = tmp_path / "reflections"
    add(logs / "alpha.jsonl", "one")
    db = tmp_path / "idx.db"
    db.write_bytes(b"this is not a database" * 100)
    index = ReflectionIndex(db)
    index.refresh("r", logs)
    assert [i.title for i in index.items("r")] == ["one"]


def test_search_finds_titles_bodies_and_notes_with_no_fts_syntax_errors(tmp_path: Path) -> None:
    logs = tmp_path / "reflections"
    uid = add(logs / "alpha.jsonl", "Wire the retry budget")
    append_event(
        logs / "alpha.jsonl",
        make_event(
            "done",
            uid,
            host="alpha",
            by="person",
            now=T0 + timedelta(hours=1),
            note="shipped in abc123",
        ),
    )
    add(logs / "alpha.jsonl", "Unrelated thing")
    index = ReflectionIndex(tmp_path / "idx.db")
    index.refresh("r", logs)
    assert [i.title for i, _ in index.search("r", "retry")] == ["Wire the retry budget"]
    assert [i.title for i, _ in index.search("r", "abc123")] == ["Wire the retry budget"]
    assert index.search("r", 'NEAR( "unbalanced') == []
    assert index.search("other-repo", "retry") == []
