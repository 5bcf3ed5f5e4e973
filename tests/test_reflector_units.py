"""The reflector's pure parts and its store writes, in process: offer, guards, dedupe, retry."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reflect_jobs.reflections.candidates import (
    MAX_OFFERED,
    render_block,
    select_candidates,
    session_summary,
)
from reflect_jobs.reflections.fold import Item
from reflect_jobs.reflections.reflector import apply, find_duplicate, offer
from reflect_jobs.reflections.store import open_store
from reflect_jobs.writer.items import MAX_ITEM_NEW, answer_object, plan_items

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _ts(days: float) -> str:
    return (NOW - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def item(uid: str, title: str, *, base="open", kind="action", session=None, age=0.0, by="person"):  # type: ignore[no-untyped-def]
    return Item(uid.ljust(16, "0"), kind, title, "", base, by, _ts(age), _ts(age), session, "h")


def test_candidates_come_own_then_matching_then_fresh_then_closed_without_repeats():
    own = item("aaaa", "mine", session="s1", age=1)
    match = item("bbbb", "matches", age=20)  # stale (person, 30 days? no: 20 < 30): open
    stale = item("cccc", "old match", age=40)  # stale
    fresh = item("dddd", "fresh", age=0.5)
    done = item("eeee", "closed", base="done", age=2)
    note = item("ffff", "a fact", base="note", kind="learning")
    summ = item("9999", "Summary", base="note", kind="summary", session="s1")
    everything = [own, match, stale, fresh, done, note, summ]
    got = select_candidates(everything, [stale, match, summ, note], session="s1", now=NOW)
    assert [i.title for i in got] == ["mine", "old match", "matches", "fresh", "closed"]
    many = [item(f"{n:04x}", f"t{n}", age=n / 100) for n in range(50)]
    assert len(select_candidates(many, [], session=None, now=NOW)) == MAX_OFFERED
    assert session_summary(everything, "s1") is None  # written by a person, not the reflector
    mine = item("8888", "Summary", base="note", kind="summary", session="s1", by="reflector")
    assert session_summary([*everything, mine], "s1") is mine
    assert session_summary([mine], "s2") is None


def test_the_block_is_bounded_redacted_json_and_lists_only_what_fit():
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    items = [item(f"{n:04x}", f"task {n} " + "x" * 300) for n in range(30)]
    items[0].title = f"rotate {token}"
    block, shown = render_block(items, None, NOW, budget=2000)
    assert token not in block and 0 < len(shown) < 30
    listing = json.loads(block.split("Items:\n", 1)[1])
    assert [e["id"] for e in listing] == [i.id for i in shown]
    empty, none = render_block([], None, NOW)  # still offered: the call may add the first
    assert none == [] and empty.endswith("Items:\n[]\n") and "Previous summary:" not in empty
    prev = item("7777", "Summary", kind="summary", base="note")
    prev.body = "we did a thing"
    block, shown = render_block([], prev, NOW)
    assert shown == [] and 'Previous summary: "we did a thing"' in block


def test_items_parsing_is_bounded_and_rejects_what_the_contract_does_not_allow():
    answer = {
        "actions": [],
        "items": {
            "update": [
                {"id": "#ABCD", "status": "done", "note": "tests pass"},
                {"id": "abcd12", "status": "dropped"},  # no note: dropped
                {"id": "nothex", "status": "done", "note": "n"},
                {"id": "#abcd", "status": "closed", "note": "n"},  # unknown status
                {"id": "#abcd", "title": "  renamed  "},  # an edit
                {"id": "#abcd"},  # nothing to do
                "junk",
            ],
            "new": [
                {"kind": "action", "title": "t" * 5000, "body": "b"},
                {"kind": "summary", "title": "no"},
                {"kind": "Question", "title": "  why?  "},
                {"kind": "action", "title": ""},
                *[{"kind": "idea", "title": f"i{n}"} for n in range(20)],
            ],
        },
        "summary": "s" * 10_000,
    }
    plan = plan_items(answer_object("```json\n" + json.dumps(answer) + "\n```"))
    assert plan["update"] == [
        {"id": "#abcd", "status": "done", "note": "tests pass"},
        {"id": "#abcd", "title": "renamed"},
    ]
    # only the first MAX_ITEM_NEW entries are looked at; two of those are rejected
    assert (
        len(plan["new"]) == MAX_ITEM_NEW - 2
        and f"items.new: kept {MAX_ITEM_NEW} of 24" in plan["notes"]
    )
    assert len(plan["new"][0]["title"]) == 200 and plan["new"][1]["kind"] == "question"
    assert plan["new"][1]["title"] == "why?" and len(plan["summary"]) == 2000
    assert any("without a note" in n for n in plan["notes"])
    assert any("unknown kind" in n for n in plan["notes"])
    empty = plan_items(answer_object('{"actions": []}'))
    assert empty == {"update": [], "new": [], "summary": None, "notes": []}
    assert plan_items(answer_object("prose"))["update"] == []
    assert plan_items({"items": [1], "summary": 5})["notes"] == ["items is not an object: ignored"]


def test_a_new_item_is_a_duplicate_by_title_or_a_near_twin_of_a_live_item():
    held = [
        item("aaaa", "Fix the flaky login test on CI"),
        item("bbbb", "Remove the old cron job", base="done"),
        item("cccc", "Migrate the billing tables", base="dropped"),
    ]
    assert find_duplicate("fix the  FLAKY login test on ci", held) is held[0]
    assert find_duplicate("Fix the flaky login test on CI now", held) is held[0]  # 7/8 words
    assert find_duplicate("Remove the old cron job", held) is held[1]  # same title, closed
    assert find_duplicate("Migrate the billing tables now please", held) is None  # 4/6, closed
    assert find_duplicate("Fix the login page", held) is None
    assert find_duplicate("anything", [item("dddd", "anything", kind="summary")]) is None


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {
        "REFLECT_HOME": str(tmp_path / "home"),
        "GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb"),
        "REFLECT_HOST": "hostA",
    }
    st = open_store("demo-repo-1234", tmp_path, env)
    yield st
    st.close()


def test_apply_changes_only_offered_items_and_a_retry_appends_nothing(store):
    login, _ = store.add("action", "Fix the flaky login test")
    other, _ = store.add("action", "Write the release notes")
    edited, _ = store.add("question", "Which Python does CI run")
    plan = {
        "update": [
            {"id": login.id, "status": "done", "note": "passes now"},
            {"id": other.id, "status": "done", "note": "not offered"},
            {"id": "#ffffff", "status": "done", "note": "unknown"},
            {"id": edited.id, "title": "Which Python does CI run (3.11?)"},  # an edit
        ],
        "new": [{"kind": "action", "title": "Add a deploy retry", "body": ""}],
        "summary": "first",
    }
    kw = dict(offered=[login.uid, edited.uid], session="s1", job_id="j1")
    first = apply(store, plan, **kw)
    assert (first.updated, first.ignored, first.added, first.summary) == (2, 2, 1, "added")
    lines = store.log.read_text().splitlines()
    again = apply(store, plan, **kw)
    assert store.log.read_text().splitlines() == lines  # the retry wrote nothing
    assert again.ignored == 2 and again.added == 1 and again.updated == 1  # the edit, again
    assert again.unchanged == 1  # the login item is already done
    by_title = {i.title: i for i in store.items("all")}
    assert by_title["Fix the flaky login test"].base == "done"
    assert by_title["Write the release notes"].base == "open"
    assert "Which Python does CI run (3.11?)" in by_title
    assert by_title["Add a deploy retry"].session == "s1"
    assert by_title["Add a deploy retry"].by == "reflector"
    second = apply(store, {"summary": "second"}, offered=[], session="s1", job_id="j2")
    summaries = [i for i in store.items("all") if i.kind == "summary"]
    assert second.summary == "replaced" and [s.body for s in summaries] == ["second"]


def test_offer_searches_the_store_with_a_compound_identifier_in_the_excerpt(store):
    assert offer(store, "s1", "anything", NOW).block.endswith("Items:\n[]\n")  # empty store
    store.add("action", "Fix login_test.py flakiness")
    got = offer(store, "s1", "No, run login_test.py with -p no:cacheprovider first.", NOW)
    assert [i.title for i in got.items] == ["Fix login_test.py flakiness"]
    assert got.uids == [got.items[0].uid] and got.items[0].id in got.block


def test_the_heuristic_writer_does_not_extract_from_the_offered_items():
    from reflect_jobs.writer.heuristic import heuristic_actions

    block, _ = render_block([item("aaaa", "Fix it. No, never use var in this repo.")], None, NOW)
    assert heuristic_actions("Opened a.py.\n" + block) == []
    assert heuristic_actions("No, never use var in this repo.\n" + block)  # the slice still is
