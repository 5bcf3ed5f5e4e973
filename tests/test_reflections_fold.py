"""The pure fold of reflection events: latest event wins, a total order, derived stale, ids."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from reflect_jobs.reflections.events import format_ts, make_event
from reflect_jobs.reflections.fold import abbreviate, derived_status, fold, fold_item

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
UID = "a1b2c3d4e5f60718"


def ev(op: str, at: datetime, *, host: str = "alpha", by: str = "reflector", uid: str = UID, **kw):
    return make_event(op, uid, host=host, by=by, now=at, **kw)


def test_latest_event_wins_across_hosts_whatever_the_read_order() -> None:
    events = [
        ev("add", T0, kind="action", title="Wire X", body="first"),
        ev("edit", T0 + timedelta(hours=2), host="beta", body="beta's body"),
        ev("edit", T0 + timedelta(hours=1), host="alpha", body="alpha's older body"),
        ev("done", T0 + timedelta(hours=3), host="beta", note="shipped in abc123"),
    ]
    results = set()
    for seed in range(10):
        shuffled = events[:]
        random.Random(seed).shuffle(shuffled)
        item = fold_item(shuffled)
        assert item is not None
        results.add((item.body, item.base, item.updated_at, tuple(n["text"] for n in item.notes)))
    assert results == {
        ("beta's body", "done", format_ts(T0 + timedelta(hours=3)), ("shipped in abc123",))
    }


def test_equal_timestamps_break_ties_by_host_then_event_id() -> None:
    add = ev("add", T0, kind="action", title="Wire X")
    at = T0 + timedelta(minutes=5)
    a = ev("edit", at, host="alpha", title="from alpha")
    b = ev("edit", at, host="beta", title="from beta")
    assert fold_item([b, add, a]).title == "from beta"  # "beta" > "alpha"
    c1, c2 = ev("edit", at, host="gamma", title="one"), ev("edit", at, host="gamma", title="two")
    winner = max((c1, c2), key=lambda e: e["eid"])["title"]
    assert fold_item([c1, c2, add]).title == fold_item([add, c2, c1]).title == winner


def test_reopen_after_done_on_another_host_and_notes_keep_the_trail() -> None:
    item = fold_item(
        [
            ev("add", T0, kind="question", title="Still need the flag?"),
            ev("done", T0 + timedelta(days=1), host="beta", note="no: removed in #12"),
            ev("reopen", T0 + timedelta(days=2), note="it came back"),
        ]
    )
    assert item.base == "open"
    assert [(n["op"], n["text"]) for n in item.notes] == [
        ("done", "no: removed in #12"),
        ("reopen", "it came back"),
    ]


@pytest.mark.parametrize(
    ("by", "fresh_days", "stale_days"), [("reflector", 6, 8), ("person", 29, 31), ("skill", 29, 31)]
)
def test_open_items_read_stale_after_their_author_threshold(
    by: str, fresh_days: int, stale_days: int
) -> None:
    item = fold_item([ev("add", T0, by=by, kind="action", title="Wire X")])
    assert (
        derived_status(item.base, item.by, item.updated_at, T0 + timedelta(days=fresh_days))
        == "open"
    )
    assert (
        derived_status(item.base, item.by, item.updated_at, T0 + timedelta(days=stale_days))
        == "stale"
    )
    assert item.to_json(T0 + timedelta(days=stale_days))["status"] == "stale"


@pytest.mark.parametrize(
    "touch",
    [
        lambda at: ev("edit", at, body="new detail"),
        lambda at: ev("reopen", at, note="still relevant"),
        lambda at: ev("add", at, kind="action", title="Wire X"),  # re-adding the same item
    ],
    ids=["edit", "reopen", "re-add"],
)
def test_touching_a_stale_item_brings_it_back(touch) -> None:  # type: ignore[no-untyped-def]
    now = T0 + timedelta(days=20)
    events = [ev("add", T0, kind="action", title="Wire X")]
    assert fold_item(events).to_json(now)["status"] == "stale"
    events.append(touch(T0 + timedelta(days=19)))
    assert fold_item(events).to_json(now)["status"] == "open"
    assert fold_item(events).to_json(now + timedelta(days=8))["status"] == "stale"


def test_closed_and_note_items_never_read_stale() -> None:
    later = T0 + timedelta(days=400)
    done = fold_item([ev("add", T0, kind="action", title="A"), ev("done", T0, note="ok")])
    note = fold_item([ev("add", T0, kind="gotcha", title="B")])
    summary = fold_item([ev("add", T0, kind="summary", title="Session so far")])
    assert done.to_json(later)["status"] == "done"
    assert note.to_json(later)["status"] == "note"
    assert summary.to_json(later)["status"] == "note"


def test_events_without_their_add_wait_for_it() -> None:
    orphan = [ev("done", T0, note="closed before the add was synced")]
    assert fold_item(orphan) is None
    assert fold(orphan) == []


def test_ids_grow_past_four_digits_only_where_uids_collide() -> None:
    ids = abbreviate(
        ["a1b2000000000000", "a1b2ffffffffffff", "a1b3000000000000", "ffff000000000000"]
    )
    assert ids == {
        "a1b2000000000000": "#a1b20",
        "a1b2ffffffffffff": "#a1b2f",
        "a1b3000000000000": "#a1b3",
        "ffff000000000000": "#ffff",
    }
    assert abbreviate(reversed(list(ids))) == ids


def test_fold_assigns_ids_and_lists_newest_first() -> None:
    events = [
        ev("add", T0, uid="1111aaaa00000000", kind="action", title="old"),
        ev("add", T0 + timedelta(hours=1), uid="2222bbbb00000000", kind="note", title="new"),
    ]
    items = fold(events)
    assert [(i.id, i.title) for i in items] == [("#2222", "new"), ("#1111", "old")]


def test_an_add_comes_first_among_events_of_one_instant_and_host() -> None:
    # Random event ids decided the order before the op rank joined the key: about half of
    # these folds then read "open" (the add applied after the done).
    for _ in range(20):
        item = fold_item([ev("done", T0, note="ok"), ev("add", T0, kind="action", title="A")])
        assert item.base == "done"
