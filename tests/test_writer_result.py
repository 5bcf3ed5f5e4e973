"""ModelResult: envelope parsing, coercion, and the lossless ledger round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflect_jobs.writer import ModelResult, result_from_cli
from reflect_jobs.writer.result import coerce_int, find_envelope

ANSWERS = Path(__file__).parent / "stubs" / "answers"


def parse(stdout: str, stderr: str = "", exit_code: int | None = 0) -> ModelResult:
    return result_from_cli(stdout, stderr, backend="claude", model="m", exit_code=exit_code)


@pytest.mark.parametrize("name", sorted(p.name for p in ANSWERS.glob("*.json")))
def test_every_canned_answer_round_trips(name: str) -> None:
    result = parse((ANSWERS / name).read_text())
    assert result.envelope_ok
    assert ModelResult.from_json(result.to_json()) == result
    assert set(result.usage) == {
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    }


def test_success_fields() -> None:
    result = parse((ANSWERS / "success.json").read_text())
    assert result.tokens == 14210 + 412 + 3120
    assert result.cost_usd == 0.0734 and result.num_turns == 1
    assert result.subtype == "success" and not result.is_error
    assert result.text.startswith('{"actions"')


@pytest.mark.parametrize(
    ("value", "expect"),
    [(None, 0), ("0", 0), (0.0, 0), ("garbage", 0), (2, 2), ("3", 3), (2.9, 2), ("nan", 0)]
    + [(float("inf"), 0), ([1], 0), ({"n": 1}, 0), ("1e3", 1000), (True, 1)],
)
def test_coerce_int(value: object, expect: int) -> None:
    assert coerce_int(value) == expect


def test_hostile_envelope_fields() -> None:
    env = {
        "type": "result",
        "is_error": 0,
        "num_turns": "2",
        "result": {"actions": []},
        "total_cost_usd": "NaN",
        "usage": {"input_tokens": "12", "output_tokens": -5, "cache_read_input_tokens": None},
        "subtype": None,
    }
    result = parse(json.dumps(env))
    assert result.envelope_ok and not result.is_error and result.num_turns == 2
    assert result.text == '{"actions": []}'
    assert result.cost_usd == 0.0 and result.tokens == 12 and result.subtype == ""
    assert parse(json.dumps({**env, "usage": "lots"})).tokens == 0


def test_no_envelope_defaults_to_error() -> None:
    for stdout in ("", "plain prose", "[1, 2]", '{"foo": 1}', "{"):
        result = parse(stdout)
        assert not result.envelope_ok and result.is_error and result.text == stdout


def test_stream_json_last_result_line() -> None:
    lines = [
        {"type": "system", "subtype": "init"},
        {"type": "result", "result": "first", "num_turns": 1},
        {"type": "system", "subtype": "rate_limit", "rate_limit_info": {"status": "allowed"}},
        {"type": "result", "result": "last", "num_turns": 3},
    ]
    stdout = "\n".join(json.dumps(x) for x in lines)
    result = parse(stdout)
    assert result.envelope_ok and result.text == "last" and result.num_turns == 3
    assert result.rate_limit_info == [{"status": "allowed"}]
    assert find_envelope("not json\n" + json.dumps(lines[1])) == lines[1]


def test_from_json_ignores_unknown_keys_and_rejects_non_objects() -> None:
    result = parse((ANSWERS / "prose.json").read_text())
    data = json.loads(result.to_json())
    data["added_in_a_later_version"] = 1
    assert ModelResult.from_json(json.dumps(data)) == result
    with pytest.raises(ValueError):
        ModelResult.from_json("[]")


@settings(max_examples=200, deadline=None)
@given(
    stdout=st.text(),
    stderr=st.text(max_size=50),
    exit_code=st.none() | st.integers(-255, 255),
    timed_out=st.booleans(),
)
def test_round_trip_property(stdout: str, stderr: str, exit_code: int | None, timed_out: bool):
    result = result_from_cli(
        stdout, stderr, backend="b", model="m", exit_code=exit_code, timed_out=timed_out
    )
    assert ModelResult.from_json(result.to_json()) == result
    assert result.tokens >= 0 and result.num_turns == coerce_int(result.num_turns)
