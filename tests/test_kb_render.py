"""Ids, YAML escaping, note/sidecar rendering and parsing (SPEC-drain §4.2, §9.3 #15-18)."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reflect_jobs.kb import (
    NoteError,
    learning_id,
    normalize_sidecar,
    parse_note,
    render_note,
    render_sidecar,
    slugify,
    yaml_scalar,
)
from reflect_jobs.lifecycle import CAUSAL_TYPES

TS = "2025-01-02T03:04:05Z"
CORE_KEYS = [
    "type", "id", "created", "updated", "scope", "confidence", "confidence_num",
    "learning_type", "title", "tags", "key_insight", "problem", "root_cause", "fix", "rule",
    "category", "entities", "causal_relations", "source_path", "session_id", "status",
]  # fmt: skip
HOSTILE = [
    "---",
    "a\n---\nb",
    "causes\ninjected: pwned",
    "key: value",
    "x: y # comment",
    '"quoted" and \\"escaped\\"',
    "back\\slash\\",
    "&a anchor *a alias",
    "!!python/object:os.system",
    "!!python/object/apply:os.system ['echo pwned']",
    "{flow: map}",
    "[flow, seq]",
    "- list item",
    "? complex key",
    "| block",
    "> folded",
    "%YAML 1.1",
    "@reserved `tick`",
    "ünïcödé ✓ 日本語 🎉",
    "tab\there\r\nwindows\x0bvt\x0cff\x85nel\u2028ls\u2029ps",
    "ctrl \x00\x01\x07\x1b\x7f\x9f bom\ufeff",
    "lone surrogate \ud800 here",
    "yes",
    "null",
    "~",
    "123",
    "0x1F",
    "2025-01-01",
    "   ",
    "",
    "x" * 10_000,
]


def learning(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "title": "Use pnpm not npm in this repo",
        "category": "tooling",
        "key_insight": "The lockfile is pnpm-lock.yaml",
        "problem": "npm install rewrote the lockfile",
        "root_cause": "wrong package manager",
        "fix": "run pnpm install",
        "rule": "Always use pnpm here",
        "confidence_num": 0.9,
        "tags": ["pnpm", "npm"],
        "entities": ["pnpm", "npm"],
        "causal_relations": [
            {"source": "npm install", "target": "lockfile churn", "type": "causes"}
        ],
        "body": "## Problem\nnpm install churned.\n\n## Solution\nUse pnpm.",
    }
    base.update(over)
    return base


def render(lrn: dict[str, object], **kw: object) -> str:
    note_id = learning_id(str(lrn.get("title") or ""), str(lrn.get("rule") or ""))
    args: dict[str, object] = dict(
        note_id=note_id, created=TS, updated=TS, source_path="/t.jsonl", session_id="s1"
    )
    args.update(kw)
    return render_note(lrn, **args)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ ids


def test_slugify_rules() -> None:
    assert slugify("Use pnpm, not NPM!") == "use-pnpm-not-npm"
    assert slugify("---") == "learning"
    assert slugify("") == "learning"
    assert slugify("日本語") == "learning"
    long = slugify("word " * 40)
    assert len(long) <= 60 and not long.endswith("-")


def test_learning_id_matches_spec_formula() -> None:
    title, rule = "  Use pnpm  ", "Always pnpm"
    digest = hashlib.sha1(b"Use pnpmAlways pnpm").hexdigest()[:6]
    assert learning_id(title, rule) == f"lrn-use-pnpm-{digest}"
    untitled = hashlib.sha1(b"untitledr").hexdigest()[:6]
    assert learning_id("", "r") == f"lrn-untitled-{untitled}"


def test_learning_id_is_stable_and_content_sensitive() -> None:
    assert learning_id("T", "r") == learning_id("T", "r")
    assert learning_id("T", "r") != learning_id("T", "r2")


# ----------------------------------------------------------------------------- yaml_scalar


@pytest.mark.parametrize("s", HOSTILE)
def test_yaml_scalar_is_one_line_and_round_trips(s: str) -> None:
    out = yaml_scalar(s)
    assert "\n" not in out and "\r" not in out
    loaded = yaml.safe_load(f"k: {out}\n")
    assert list(loaded) == ["k"]
    assert isinstance(loaded["k"], str)
    assert "\n" not in loaded["k"]


def test_yaml_scalar_collapses_whitespace_and_escapes() -> None:
    assert yaml_scalar("a\n\n  b\tc") == '"a b c"'
    assert yaml_scalar('say "hi" \\o/') == '"say \\"hi\\" \\\\o/"'
    assert yaml.safe_load(yaml_scalar('say "hi" \\o/')) == 'say "hi" \\o/'


# --------------------------------------------------------------------- render / parse (§9.3)


def test_render_md_shape_spec_15() -> None:
    text = render(learning())
    assert text.startswith("---\n")
    for key in ("title:", "category:", "key_insight:"):
        assert f"\n{key}" in text
    assert "\nconfidence: high\n" in text
    assert "\n## " in text


def test_render_parse_round_trip_and_key_order() -> None:
    lrn = learning()
    note = parse_note(render(lrn))
    fm = note.frontmatter
    assert list(fm) == CORE_KEYS
    assert fm["title"] == lrn["title"]
    assert fm["tags"] == ["pnpm", "npm"]
    assert fm["causal_relations"] == [
        {"source": "npm install", "target": "lockfile churn", "type": "causes"}
    ]
    assert fm["created"] == TS and isinstance(fm["created"], str)
    assert fm["confidence_num"] == 0.9
    assert fm["status"] == "active"
    assert note.body == lrn["body"]


@pytest.mark.parametrize(
    ("num", "bucket", "value"),
    [(0.8, "high", 0.8), (0.5, "medium", 0.5), (0.49, "low", 0.49), ("x", "medium", 0.6),
     (None, "medium", 0.6), (7, "high", 1.0), (float("nan"), "medium", 0.6), (True, "medium", 0.6)],
)  # fmt: skip
def test_confidence_buckets(num: object, bucket: str, value: float) -> None:
    fm = parse_note(render(learning(confidence_num=num))).frontmatter
    assert (fm["confidence"], fm["confidence_num"]) == (bucket, value)


def test_body_without_heading_is_wrapped() -> None:
    note = parse_note(render(learning(body="just prose\n---\nfoo: bar", fix="do X")))
    assert note.body.startswith("## Problem\nnpm install rewrote the lockfile")
    assert "## Solution\ndo X" in note.body and "## Context\njust prose\n---\nfoo: bar" in note.body
    assert list(note.frontmatter) == CORE_KEYS


def test_learning_type_from_model_or_default() -> None:
    assert parse_note(render(learning(learning_type="gotcha"))).frontmatter["learning_type"] == (
        "gotcha"
    )
    for bad in (None, "evil\ninjected: 1", 3):
        fm = parse_note(render(learning(learning_type=bad))).frontmatter
        assert fm["learning_type"] == "bug-fix"


def test_string_tags_and_entities_are_one_item_not_characters() -> None:
    fm = parse_note(render(learning(tags="pnpm", entities="npm"))).frontmatter
    assert fm["tags"] == ["pnpm"] and fm["entities"] == ["npm"]


def test_causal_type_injection_spec_17() -> None:
    rel = [{"source": "a", "target": "b", "type": "causes\ninjected: pwned"}]
    lrn = learning(causal_relations=rel)
    fm = parse_note(render(lrn)).frontmatter
    assert "injected" not in fm
    assert fm["causal_relations"] == [{"source": "a", "target": "b", "type": "relates_to"}]
    side = yaml.safe_load(render_sidecar("lrn-x-abcdef", lrn, extracted_at=TS))
    assert set(side) == {"document_id", "extracted_at", "entities", "relationships"}
    assert side["relationships"][0]["type"] == "relates_to"
    assert all("injected" not in e for e in side["entities"] + side["relationships"])


def test_all_whitelisted_causal_types_survive() -> None:
    rels = [{"source": "a", "target": t, "type": t} for t in sorted(CAUSAL_TYPES)]
    fm = parse_note(render(learning(causal_relations=rels))).frontmatter
    assert [r["type"] for r in fm["causal_relations"]] == sorted(CAUSAL_TYPES)


def test_sidecar_validates_spec_16_and_shares_id_spec_18() -> None:
    lrn = learning()
    note = parse_note(render(lrn))
    raw = yaml.safe_load(render_sidecar(note.id, lrn, extracted_at=TS))
    assert raw["document_id"] == note.id  # §9.3 #18
    assert raw["extracted_at"] == TS
    assert raw["entities"] and raw["relationships"]
    for ent in raw["entities"]:
        assert set(ent) == {"name", "type", "description"}
    for rel in raw["relationships"]:
        assert set(rel) == {"source", "target", "type", "description", "strength"}
    side = normalize_sidecar(raw)
    names = {e["name"] for e in side["entities"]}
    assert {"pnpm", "npm", "npm install", "lockfile churn"} <= names  # endpoints are entities


def test_sidecar_empty_lists() -> None:
    raw = yaml.safe_load(
        render_sidecar("lrn-x-1", learning(entities=[], causal_relations=[]), extracted_at=TS)
    )
    assert raw["entities"] == [] and raw["relationships"] == []


@pytest.mark.parametrize("s", HOSTILE)
def test_hostile_string_in_every_field(s: str) -> None:
    fields = ["title", "category", "key_insight", "problem", "root_cause", "fix", "rule"]
    lrn = learning(
        **{f: s for f in fields},
        tags=[s, "ok"],
        entities=[s],
        causal_relations=[{"source": s, "target": s + "x", "type": s}],
        learning_type=s,
        body=s,
    )
    if not s.strip():
        lrn["title"] = "blank"
    text = render(lrn, source_path=s, session_id=s, created=s, updated=s)
    note = parse_note(text)
    assert list(note.frontmatter) == CORE_KEYS
    fm = note.frontmatter
    collapsed = " ".join(s.split())
    assert fm["problem"].replace("\ufffd", "") == collapsed.replace("\ud800", "")
    assert all(r["type"] == "relates_to" for r in fm["causal_relations"])
    assert len(fm["causal_relations"]) == (1 if s.strip() else 0)
    side = yaml.safe_load(render_sidecar(note.id, lrn, extracted_at=s))
    assert set(side) == {"document_id", "extracted_at", "entities", "relationships"}
    normalize_sidecar(side)


_texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200
) | st.sampled_from(HOSTILE)


@settings(max_examples=100, deadline=None)
@given(
    title=_texts,
    other=_texts,
    tags=st.lists(_texts, max_size=4),
    rel_type=_texts,
    body=_texts,
)
def test_property_no_value_adds_a_key(
    title: str, other: str, tags: list[str], rel_type: str, body: str
) -> None:
    lrn = learning(
        title=title or "t",
        key_insight=other,
        fix=other,
        category=other,
        tags=tags,
        entities=tags,
        causal_relations=[{"source": other or "s", "target": title or "t", "type": rel_type}],
        body=body,
    )
    if not str(lrn["title"]).strip():
        lrn["title"] = "t"
    fm = parse_note(render(lrn, session_id=other)).frontmatter
    assert list(fm) == CORE_KEYS
    assert fm["key_insight"] == _norm(other)
    assert fm["tags"] == list(dict.fromkeys(t for t in map(_norm, tags) if t))


def _norm(s: str) -> str:
    """What a frontmatter value reads back as: whitespace collapsed, surrogates replaced."""
    return " ".join(s.split()).replace("\ud800", "\ufffd")


def test_extra_and_status_keys() -> None:
    text = render(
        learning(),
        status="superseded",
        extra={"sources": ["a", "b\nc: d"], "proof_count": 3, "superseded_by": "lrn-y-1"},
    )
    fm = parse_note(text).frontmatter
    assert fm["status"] == "superseded"
    assert fm["sources"] == ["a", "b c: d"] and fm["proof_count"] == 3
    assert fm["superseded_by"] == "lrn-y-1"
    with pytest.raises(ValueError):
        render(learning(), status="bogus\nx: y")


# --------------------------------------------------------------------------- parse (B12)


def test_parse_splits_on_fence_lines_not_substrings() -> None:
    text = (
        '---\nid: lrn-a-1\ntitle: "x --- y"\ncategory: c\nkey_insight: "k---"\n---\nbody\n---\nmore'
    )
    note = parse_note(text)
    assert note.frontmatter["title"] == "x --- y"
    assert note.body == "body\n---\nmore"


@pytest.mark.parametrize(
    "text",
    [
        "no frontmatter",
        "---\nid: a\ntitle: t\ncategory: c\nkey_insight: k\n",  # unclosed
        "---\n- a list\n---\n",
        "---\nid: a\ntitle: t\ncategory: c\n---\n",  # key_insight missing
        "---\nid: a\ntitle: ''\ncategory: c\nkey_insight: k\n---\n",
        "---\ntitle: t\ncategory: c\nkey_insight: k\n---\n",  # id missing
        "---\nid: a\ntitle: [unclosed\n---\n",
        "---\nid: !!python/object/apply:os.system ['true']\ntitle: t\ncategory: c\nkey_insight: k\n---\n",
    ],
)
def test_parse_rejects_bad_notes(text: str) -> None:
    with pytest.raises(NoteError):
        parse_note(text)


def test_parse_tolerates_crlf_and_bom() -> None:
    text = "\ufeff---\r\nid: a\r\ntitle: t\r\ncategory: c\r\nkey_insight: k\r\n---\r\nbody\r\n"
    note = parse_note(text)
    assert note.id == "a" and note.body == "body"
