"""Property-based fuzzing of the three transcript readers (Claude Code, Codex, Copilot).

``tests/test_transcripts.py`` pins hand-picked bad inputs (truncated lines, binary garbage,
empty files) with example tests, mostly for Claude Code. Nothing fuzzed the readers, and
nothing at all exercised the Codex and Copilot parsers with hostile records. Transcripts
are written by other programs, copied, truncated by crashes and synced half-way, so the
reader must be *total*: for any bytes on disk it returns a ``Transcript`` or raises the
one documented ``UnreadableTranscript`` — never anything else, which would crash the
prepare stage in a loop until the job is poisoned.

Properties, each with ≥200 examples:

1. structure-aware records of all three shapes (right keys, wrong types, random values),
   with and without a harness hint → only ``UnreadableTranscript``; turns are well formed
   and within the memory cap; and the $0 cascade (``prepare``) accepts whatever came out;
2. raw random bytes → only ``UnreadableTranscript``;
3. valid records of one format interleaved with garbage lines (random bytes, strict
   prefixes of valid lines, blank lines) → exactly the same dialogue as the clean file:
   a damaged line never costs a neighbouring turn.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Hashable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from reflect_jobs.cascade import EmptyLedger, prepare
from reflect_jobs.transcripts import Transcript, UnreadableTranscript, read_transcript

pytestmark = pytest.mark.chaos

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
FIXTURES = {
    "claude": DATA / "claude-spec-example.jsonl",
    "codex": DATA / "codex-rollout.jsonl",
    "copilot": DATA / "copilot-events.jsonl",
}
HARNESS_HINTS = [None, "claude", "codex", "copilot", "claude-code", "copilot-cli"]
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_WORKDIR = Path(tempfile.mkdtemp(prefix="fuzz-transcripts-"))
atexit.register(shutil.rmtree, _WORKDIR, ignore_errors=True)


def _write(data: bytes) -> Path:
    fd, name = tempfile.mkstemp(dir=_WORKDIR, suffix=".jsonl")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return Path(name)


def _read(data: bytes, harness: str | None, max_chars: int = 2_000_000) -> Transcript | None:
    """``read_transcript`` on ``data``; None for the documented refusal, anything else raises."""
    path = _write(data)
    try:
        return read_transcript(path, harness=harness, max_chars=max_chars)
    except UnreadableTranscript:
        return None
    finally:
        path.unlink()


def _check_well_formed(t: Transcript, max_chars: int) -> None:
    assert t.format in ("claude", "codex", "copilot")
    assert sum(len(turn.text) for turn in t.turns) <= max_chars
    for turn in t.turns:
        assert turn.role in ("user", "assistant")
        assert isinstance(turn.text, str) and turn.text
        assert turn.timestamp is None or isinstance(turn.timestamp, str)
    assert 0 <= t.malformed_lines <= t.total_lines


# --- strategies -------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
# Words that make real signals, secrets and machine markers show up in generated text, so
# the cascade's privacy filter, redaction and gate run on fuzzed input too.
spicy_text = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "No, never use a bare except.",
            "<private>token</private> always pin versions",
            "<system-reminder>x",
            "AKIAIOSFODNN7EXAMPLE is the key",
            "<command-name>/reflect</command-name>",
            "## Related existing learnings (belief revision)",
            "\u2026",
            "\x00",
            "\ud800",
        ]
    ),
)
text_or_junk = spicy_text | json_values
blocks = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["text", "input_text", "output_text", "tool_use", "tool_result", "thinking"]
            )
            | json_values
        },
        optional={"text": text_or_junk},
    )
    | json_values,
    max_size=4,
)
roles = st.sampled_from(["user", "assistant", "developer", "system", "tool"]) | json_values
claude_records = st.fixed_dictionaries(
    {"type": st.sampled_from(["user", "assistant", "summary", "queue-operation"]) | json_values},
    optional={
        "message": st.fixed_dictionaries(
            {"role": roles}, optional={"content": text_or_junk | blocks}
        )
        | json_values,
        "isMeta": st.booleans() | json_values,
        "content": text_or_junk,
        "timestamp": st.text(max_size=30) | json_values,
    },
)
codex_records = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["response_item", "event_msg", "session_meta", "turn_context", "compacted"]
        )
        | json_values,
        "payload": st.fixed_dictionaries(
            {"type": st.sampled_from(["message", "function_call", "user_message"]) | json_values},
            optional={"role": roles, "content": text_or_junk | blocks},
        )
        | json_values,
    },
    optional={"timestamp": st.text(max_size=30) | json_values},
)
copilot_records = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["user.message", "assistant.message", "session.start", "tool.execution_start"]
        )
        | json_values,
        "data": st.fixed_dictionaries({}, optional={"content": text_or_junk}) | json_values,
    },
    optional={"id": json_values, "parentId": json_values, "timestamp": json_values},
)
any_record = claude_records | codex_records | copilot_records | json_values


def _json_line(record: object) -> bytes:
    return json.dumps(record, allow_nan=True).encode("utf-8", "surrogatepass")


garbage_line = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    st.text(max_size=80).map(lambda s: s.replace("\n", " ").encode("utf-8", "surrogatepass")),
    st.just(b""),
    st.just(b"   "),
)


# --- properties -------------------------------------------------------------------------


@FUZZ
@given(
    records=st.lists(any_record, min_size=0, max_size=25),
    harness=st.sampled_from(HARNESS_HINTS),
    max_chars=st.sampled_from([50, 1_000, 2_000_000]),
)
def test_structured_records_never_raise_and_prepare_accepts_the_result(
    records: list[object], harness: str | None, max_chars: int
) -> None:
    if harness is None:  # the sniffing path; see the xfail test below for why
        assume(all(_sniffable(r) for r in records))
    data = b"".join(_json_line(r) + b"\n" for r in records)
    t = _read(data, harness, max_chars)
    if t is None:
        return
    _check_well_formed(t, max_chars)
    out = prepare(t, EmptyLedger(), source_name="fuzz.jsonl", max_chars=4_000)
    assert out.action in ("reflect", "skip")
    if out.action == "reflect":
        assert out.slice_text.strip() and out.new_chunk_hashes


def _sniffable(record: object) -> bool:
    """False for the one known crash: a dict whose ``type`` is unhashable."""
    return not isinstance(record, dict) or isinstance(record.get("type"), Hashable)


@pytest.mark.parametrize("record", [{"type": []}, {"type": {"a": 1}, "payload": {}}])
def test_unhashable_type_without_hint_is_just_a_malformed_record(record: object) -> None:
    line = json.dumps(record).encode()
    good = json.dumps({"type": "user", "message": {"role": "user", "content": "Hi"}}).encode()
    t = _read(line + b"\n" + good + b"\n", None)
    assert t is not None and [x.text for x in t.turns] == ["Hi"]


@FUZZ
@given(data=st.binary(max_size=4096), harness=st.sampled_from(HARNESS_HINTS))
def test_random_bytes_only_raise_unreadable(data: bytes, harness: str | None) -> None:
    t = _read(data, harness)
    if t is not None:
        _check_well_formed(t, 2_000_000)


def _fixture_lines(fmt: str) -> list[bytes]:
    return [ln for ln in FIXTURES[fmt].read_bytes().splitlines() if ln.strip()]


@st.composite
def mixed_file(draw: st.DrawFn) -> tuple[str, bytes, bytes]:
    """(format, clean file, the same records with garbage lines interleaved)."""
    fmt = draw(st.sampled_from(sorted(FIXTURES)))
    valid = _fixture_lines(fmt)
    picked = draw(st.lists(st.sampled_from(valid), min_size=1, max_size=12))
    clean: list[bytes] = []
    mixed: list[bytes] = []
    for line in picked:
        clean.append(line)
        for _ in range(draw(st.integers(0, 2))):
            if draw(st.booleans()):
                cut = draw(st.integers(1, len(line.strip()) - 1))
                mixed.append(line.strip()[:cut])  # a torn write: never valid JSON
            else:
                mixed.append(draw(garbage_line))
        mixed.append(line)
    if draw(st.booleans()):  # a crash mid-append leaves a partial last line
        mixed.append(picked[-1][: max(1, len(picked[-1]) // 2)])
    return fmt, b"\n".join(clean) + b"\n", b"\n".join(mixed)


@FUZZ
@given(case=mixed_file())
def test_garbage_lines_never_cost_a_valid_turn(case: tuple[str, bytes, bytes]) -> None:
    fmt, clean, mixed = case
    want = _read(clean, fmt)
    got = _read(mixed, fmt)
    if want is None:  # e.g. only records that carry no dialogue at all
        return
    assert got is not None, "valid records plus garbage must still be readable"
    assert [(t.role, t.text) for t in got.turns] == [(t.role, t.text) for t in want.turns]
    assert got.malformed_lines >= want.malformed_lines
