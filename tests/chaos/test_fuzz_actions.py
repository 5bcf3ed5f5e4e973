"""Property-based fuzzing of the action parser beyond ``tests/test_writer_actions.py``.

Already covered there (not repeated): ``plan_actions`` over lists of action-like dicts and
JSON values, and ``parse_actions`` → ``plan_actions`` over text, JSON dumps and fenced
answers. What was missing, and is fuzzed here with ≥200 examples each:

* inputs that are not text at all (the backend may hand over ``None``, bytes, a dict);
* pathological nesting depth (``json`` raises ``RecursionError``, which must surface as the
  documented ``UnparseableOutput``, not crash the write stage);
* a *round trip*: an answer wrapped in prose and an optional fence parses back to exactly
  the actions that were sent — the parser is lenient but never changes the answer;
* braces in the prose around an answer (first ``{`` … last ``}`` then spans prose): only
  ``UnparseableOutput`` or a list;
* the revision whitelist given junk ids (non-strings, near-miss strings): a surviving
  UPDATE/DELETE always names a listed *string* id exactly;
* the boundary into the KB: every CREATE a plan keeps renders to a note that parses back
  with the same id, whatever types the model used.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflect_jobs import kb
from reflect_jobs.writer.actions import (
    ActionPlan,
    UnparseableOutput,
    parse_actions,
    plan_actions,
)

pytestmark = pytest.mark.chaos

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LEARNING_FIELDS = [
    "title",
    "category",
    "key_insight",
    "problem",
    "root_cause",
    "fix",
    "rule",
    "confidence_num",
    "tags",
    "entities",
    "causal_relations",
    "body",
]

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=15,
)
finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=15,
)
learnings = st.dictionaries(st.sampled_from(LEARNING_FIELDS), json_values, max_size=12).map(
    lambda d: {**d, "title": d.get("title", "t")}
)
actions = st.lists(
    st.fixed_dictionaries(
        {"action": st.sampled_from(["CREATE", "UPDATE", "DELETE", " update ", "Create"])},
        optional={"learning": learnings, "target_id": json_values, "reason": json_values},
    )
    | json_values,
    max_size=8,
)
# Prose that cannot itself contain a JSON object boundary or a fence.
prose = st.text(max_size=60).map(lambda s: s.replace("{", "(").replace("}", ")").replace("`", "'"))


def _parse_or_none(text: object) -> list | None:
    try:
        return parse_actions(text)
    except UnparseableOutput:
        return None


@FUZZ
@given(value=json_values | st.binary(max_size=40) | st.builds(object))
def test_non_text_answers_are_unparseable(value: object) -> None:
    if isinstance(value, str):
        return
    assert _parse_or_none(value) is None


@FUZZ
@given(
    depth=st.integers(min_value=1, max_value=200_000),
    opener=st.sampled_from(["[", '{"a":']),
    closed=st.booleans(),
)
def test_pathological_nesting_is_unparseable_or_a_list(
    depth: int, opener: str, closed: bool
) -> None:
    closer = "]" if opener == "[" else "}"
    inner = opener * depth + "0" + (closer * depth if closed else "")
    out = _parse_or_none('{"actions": ' + inner + "}")
    assert out is None or isinstance(out, list)
    if out is not None:
        assert isinstance(plan_actions(out, allowed_ids=set()), ActionPlan)


@FUZZ
@given(
    sent=st.lists(finite_json, max_size=6),
    before=prose,
    after=prose,
    fence=st.sampled_from(["", "```json\n", "```\n"]),
)
def test_answer_in_prose_and_fence_round_trips(
    sent: list, before: str, after: str, fence: str
) -> None:
    answer = json.dumps({"actions": sent}, ensure_ascii=False)
    text = f"{fence}{before}{answer}{after}\n```" if fence else f"{before}{answer}{after}"
    assert parse_actions(text) == sent


@FUZZ
@given(
    sent=actions,
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_braces_in_surrounding_prose_never_escape(sent: list, before: str, after: str) -> None:
    text = f"{before}{{{json.dumps({'actions': sent}, allow_nan=True)}}}{after}"
    out = _parse_or_none(text)
    assert out is None or isinstance(out, list)


@FUZZ
@given(
    sent=actions,
    allowed=st.sets(
        st.sampled_from(["lrn-a-000001", "lrn-a-000001 ", "LRN-A-000001"])
        | st.integers()
        | st.none()
        | st.text(max_size=12),
        max_size=6,
    ),
)
def test_whitelist_with_junk_ids_only_honours_exact_string_ids(sent: list, allowed: set) -> None:
    plan = plan_actions(sent, allowed_ids=allowed)  # type: ignore[arg-type]
    listed = {i for i in allowed if isinstance(i, str)}
    for rev in plan.updates + plan.deletes:
        assert isinstance(rev["target_id"], str) and rev["target_id"] in listed
        assert isinstance(rev["reason"], str)
    assert all(isinstance(n, str) for n in plan.notes)


@FUZZ
@given(sent=actions)
def test_every_kept_create_renders_to_a_note_that_parses_back(sent: list) -> None:
    plan = plan_actions(sent, allowed_ids=set())
    for learning in plan.creates:
        note_id = kb.learning_id(learning["title"], learning["rule"])
        text = kb.render_note(
            learning,
            note_id=note_id,
            created="2026-11-01T00:00:00Z",
            updated="2026-11-01T00:00:00Z",
            source_path="/t.jsonl",
            session_id="s",
        )
        note = kb.parse_note(text)
        assert note.id == note_id
        assert math.isfinite(float(note.frontmatter["confidence_num"]))
