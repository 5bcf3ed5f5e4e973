"""classify_output and the drift streak: SPEC-drain §9.6 #55-63."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflect_jobs.writer import POISON_MARKERS, SIZE_MARKERS, classify_output
from reflect_jobs.writer.classifier import CATEGORIES, Streak, threshold_from, track

VALID_ENVELOPE = json.dumps(
    {"type": "result", "is_error": False, "num_turns": 1, "result": '{"actions": []}'}
)


@pytest.mark.parametrize(
    ("raw", "category"),
    [
        (VALID_ENVELOPE, "valid"),
        ('{"is_error": false, "result": ""}', "valid"),
        ("I'm sorry, I can't help with that.", "prose"),
        ("Sure! Here is a summary of the session.", "prose"),
        ("", "idle"),
        ("   \n\t ", "idle"),
        ("Error: Prompt is too long: 250000 tokens > 200000 maximum", "poisoned"),
        ("the conversation is too long to continue", "poisoned"),
        ('{"is_error": true, "result": "Prompt is too long"}', "poisoned"),
        (VALID_ENVELOPE[:30], "malformed"),
        ("[1, 2, 3]", "malformed"),
        ('"just a json string"', "malformed"),
        ('{"foo": "bar"}', "malformed"),
        ('{"is_error": true, "result": "API Error: 500"}', "valid"),
    ],
)
def test_classify_table(raw: str, category: str) -> None:  # #55
    assert classify_output(raw) == category


@pytest.mark.parametrize(
    "raw",
    [
        None,
        42,
        b'{"result": 1}',
        ["x"],
        "x",
        "{",
        "[",
        "\x00\x01\x02\x7f",
        "}" * 1000,
        "<xml><a>b</a></xml>",
        json.dumps({"a": {"b": [{"c": {"d": "e"}}]}}),
        "a" * 100_000,
        "[" * 100_000,
        '{"a":' * 50_000,
    ],
)
def test_total_over_arbitrary_inputs(raw: object) -> None:  # #56
    assert classify_output(raw) in CATEGORIES


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.none(), st.integers(), st.lists(st.text())))
def test_total_property(raw: object) -> None:
    assert classify_output(raw) in CATEGORIES


def test_healthy_envelope_mentioning_context_window_is_valid() -> None:  # #57
    raw = json.dumps({"type": "result", "is_error": False, "result": "the context window was"})
    assert classify_output(raw) == "valid"


def test_markers_are_lowercase_and_size_markers_are_poison_markers() -> None:
    assert set(SIZE_MARKERS) <= set(POISON_MARKERS)
    assert all(m == m.lower() for m in POISON_MARKERS)


def test_track_respawns_on_third_invalid() -> None:  # #58
    s = Streak()
    s, r1 = track(s, "prose")
    s, r2 = track(s, "idle")
    s, r3 = track(s, "malformed")
    assert (r1, r2, r3) == (False, False, True)
    assert s.consecutive == 3 and s.categories == ("prose", "idle", "malformed")


def test_track_poisoned_respawns_at_once() -> None:  # #59
    s, respawn = track(Streak(), "poisoned")
    assert respawn and s.categories == ("poisoned",)


def test_after_respawn_next_invalid_starts_at_one() -> None:  # #60
    s = Streak(2, ("prose", "prose"))
    s, respawn = track(s, "prose")
    assert respawn
    s, respawn = track(Streak(), "prose")  # the caller stored the reset
    assert not respawn and s.consecutive == 1


def test_streaks_are_per_transcript() -> None:  # #61
    streaks: dict[str, Streak] = {"a": Streak(), "b": Streak()}
    for _ in range(2):
        streaks["a"], _r = track(streaks["a"], "prose")
    streaks["b"], respawn = track(streaks["b"], "prose")
    assert streaks["a"].consecutive == 2 and streaks["b"].consecutive == 1 and not respawn


def test_valid_resets_streak() -> None:  # #62
    s = Streak()
    for cat in ("prose", "prose", "valid"):
        s, _r = track(s, cat)
    assert s == Streak()
    for expect in (False, False, True):
        s, respawn = track(s, "prose")
        assert respawn is expect


@pytest.mark.parametrize(("value", "expect"), [(None, 3), ("2", 2), ("banana", 3), ("-1", 3)])
def test_threshold_parsing(value: object, expect: int) -> None:  # #63
    assert threshold_from(value) == expect
    s, respawn = Streak(), False
    for _ in range(expect):
        assert not respawn
        s, respawn = track(s, "prose", threshold_from(value))
    assert respawn


def test_unknown_category_counts_as_malformed() -> None:
    s, _r = track(Streak(), "banana")
    assert s.categories == ("malformed",)
