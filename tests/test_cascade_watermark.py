"""The watermark in the pure layers: reader offsets and digests, the cascade's split at the
watermark, identical windows sent once, and the ledger's never-backwards advance."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from watermark_support import CORRECTIONS, GrowingSession

from reflect_jobs.cascade import EmptyLedger, prepare
from reflect_jobs.cascade.prepare import first_new_line
from reflect_jobs.cascade.slicing import CONTEXT_MARK
from reflect_jobs.ledger import watermarks
from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.models import SessionWatermark
from reflect_jobs.transcripts import read_transcript

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def test_reader_reports_turn_offsets_end_digest_and_the_prefix_digest(tmp_path: Path) -> None:
    s = GrowingSession(tmp_path / "t.jsonl")
    s.turn(0, CORRECTIONS[0])
    s.say("user", "a partial last line")
    data = s.path.read_bytes()
    s.path.write_bytes(data[:-1])  # the last record is still being written: no newline yet
    t = read_transcript(s.path)
    complete = data[: data.rindex(b"\n", 0, len(data) - 1) + 1]
    assert [turn.end_offset for turn in t.turns][-2] == len(complete)
    # The watermark stays before the record without its newline (its bytes will change).
    assert t.end_offset == len(complete)
    assert t.end_digest == hashlib.sha256(complete).hexdigest()
    mid = t.turns[1].end_offset
    assert mid is not None
    at = read_transcript(s.path, prefix_at=mid)
    assert at.prefix_digest == hashlib.sha256(data[:mid]).hexdigest()
    assert read_transcript(s.path, prefix_at=mid + 1).prefix_digest is None  # no record ends there
    assert read_transcript(s.path, prefix_at=10**9).prefix_digest is None  # beyond the end


def test_only_signals_after_the_watermark_open_windows_and_context_is_marked(
    tmp_path: Path,
) -> None:
    s = GrowingSession(tmp_path / "t.jsonl")
    s.turn(0, CORRECTIONS[0])
    mark = read_transcript(s.path).end_offset
    s.turn(1, CORRECTIONS[1])
    t = read_transcript(s.path, prefix_at=mark)
    before = prepare(t, EmptyLedger(), source_name="t")
    after = prepare(t, EmptyLedger(), source_name="t", since_offset=mark)
    assert CORRECTIONS[0] in before.slice_text  # without a watermark: everything again
    assert CORRECTIONS[0] not in after.slice_text and CORRECTIONS[1] in after.slice_text
    marked = [ln for ln in after.slice_text.splitlines() if ln.startswith(CONTEXT_MARK)]
    assert marked == [f"{CONTEXT_MARK}Understood, fixing it (turn 0)."]
    assert after.context_lines == 1 and after.lines_before_watermark == 4
    assert "already reflected on" in after.slice_text.split("\n\n", 1)[0]  # the header says so
    assert len(after.slice_text) < len(before.slice_text)


def test_nothing_new_after_the_watermark_is_a_free_skip(tmp_path: Path) -> None:
    s = GrowingSession(tmp_path / "t.jsonl")
    s.turn(0, CORRECTIONS[0])
    mark = read_transcript(s.path).end_offset
    s.say("user", "Open module m9.py next.")  # filler only: no new signal
    out = prepare(read_transcript(s.path), EmptyLedger(), source_name="t", since_offset=mark)
    assert (out.action, out.reason, out.slice_text) == ("skip", "no_new_signal", "")


def test_first_new_line_is_right_when_the_reader_dropped_the_middle(tmp_path: Path) -> None:
    s = GrowingSession(tmp_path / "t.jsonl")
    for k in range(40):
        s.turn(k, CORRECTIONS[k % 4])
    mark = read_transcript(s.path).end_offset
    s.turn(40, "No, the rule is: never log the request body.")
    t = read_transcript(s.path, max_chars=2_000)  # head ¼ + tail ¾: the middle is dropped
    assert t.dropped_chars > 0
    first = first_new_line(t.turns, mark)
    lines = t.lines()
    assert lines[first] == "Open module m40_0.py next." and first == len(lines) - 4
    out = prepare(t, EmptyLedger(), source_name="t", since_offset=mark)
    assert "never log the request body" in out.slice_text
    assert all(c not in out.slice_text.replace(CONTEXT_MARK, "\0") for c in CORRECTIONS[1:])


def test_identical_windows_within_one_slice_are_sent_once(tmp_path: Path) -> None:
    # A session made of one block of exchanges repeated (a pasted loop, a replayed log).
    block = GrowingSession(tmp_path / "block.jsonl")
    for k, correction in enumerate(CORRECTIONS):
        block.turn(k, correction, filler=3)
    records = block.path.read_text().splitlines()
    big = tmp_path / "repeated.jsonl"
    big.write_text("\n".join(records * 600) + "\n")
    one = prepare(read_transcript(block.path), EmptyLedger(), source_name="b")
    out = prepare(read_transcript(big), EmptyLedger(), source_name="r")
    assert out.action == "reflect" and out.signal_count == 600 * len(CORRECTIONS)
    windows = out.slice_text.split("\n\n", 1)[1].split("\n…\n")
    assert len(windows) == len(set(windows)) == out.chunks_total  # no window twice
    # Each correction's window once, plus the two that differ at the ends of the dialogue
    # the reader keeps (the end of the file, and the head/tail split that cuts one line).
    assert all(c in out.slice_text for c in CORRECTIONS)
    assert out.chunks_total <= len(CORRECTIONS) + 2
    print(  # the figure reported with this change (pytest -s)
        f"\nrepeated session {big.stat().st_size:,} bytes: slice {len(out.slice_text):,} chars"
        f" (one block alone: {len(one.slice_text):,})"
    )
    assert len(out.slice_text) < 2 * len(one.slice_text)


def test_advance_never_moves_back_and_carries_a_reset(env) -> None:
    _advance_scenario(env.settings().db_url)


@pytest.mark.services
def test_advance_on_postgresql() -> None:
    name = "rj_wm_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        _advance_scenario(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
    finally:
        dispose_all()
        with admin.connect() as c:
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


def _advance_scenario(db: str) -> None:
    key = {"harness": "claude", "session_id": "s1", "transcript_path": "/t/a.jsonl"}

    def plan(base: tuple[int, str] | None, end: tuple[int, str], holds: bool = True) -> dict:
        b = watermarks.Mark(*base) if base else None
        return watermarks.plan(b, b.digest if (b and holds) else None, watermarks.Mark(*end))

    def offset() -> int | None:
        with session_scope(db) as s:
            m = watermarks.current(s, "claude", "s1", "/t/a.jsonl")
            return m.offset if m else None

    with session_scope(db) as s:
        assert not watermarks.advance(s, planned={"offset": 0}, job_id="j0", **key)
        assert watermarks.advance(s, planned=plan(None, (100, "a")), job_id="j1", **key)
    # Two jobs prepared from the 100 mark; the later one (300) commits first.
    late, early = plan((100, "a"), (300, "c")), plan((100, "a"), (200, "b"))
    with session_scope(db) as s:
        assert watermarks.advance(s, planned=late, job_id="j3", **key)
    with session_scope(db) as s:
        assert not watermarks.advance(s, planned=early, job_id="j2", **key)
    assert offset() == 300
    # The file was rewritten shorter: prepare saw the 300 mark fail its prefix check.
    reset = plan((300, "c"), (50, "z"), holds=False)
    assert reset["reset"] and reset["since"] == 0
    with session_scope(db) as s:
        assert watermarks.advance(s, planned=reset, job_id="j4", **key)
    assert offset() == 50
    with session_scope(db) as s:  # an unknown session id is keyed by its path
        assert watermarks.advance(
            s,
            harness="claude",
            session_id="unknown",
            transcript_path="/t/b.jsonl",
            planned=plan(None, (10, "q")),
            job_id="j5",
        )
        keys = sorted(r.session_key for r in s.query(SessionWatermark))
    assert keys == ["path:/t/b.jsonl", "s1"]


def test_plan_records_what_prepare_saw(tmp_path: Path) -> None:
    planned = watermarks.plan(watermarks.Mark(10, "d"), "d", watermarks.Mark(20, "e"))
    assert planned == {
        "base_offset": 10,
        "base_digest": "d",
        "since": 10,
        "reset": False,
        "offset": 20,
        "digest": "e",
    }
    assert json.loads(json.dumps(planned)) == planned  # stored as JSON on the job
