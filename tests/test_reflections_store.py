"""Store operations in-process: causal timestamps, re-adding, ids, statuses (real files)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reflect_jobs.reflections.index import ReflectionIndex
from reflect_jobs.reflections.store import BadIdError, Store, StoreError
from reflect_jobs.repo import Repo

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def two(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Two machines over one memory home, each with its own index."""
    repo = Repo("example.com/o/demo", None, tmp_path / "memory")
    a = Store(repo, "alpha", ReflectionIndex(tmp_path / "a.db"))
    b = Store(repo, "beta", ReflectionIndex(tmp_path / "b.db"))
    yield a, b
    a.close()
    b.close()


def test_a_change_from_a_machine_whose_clock_is_behind_still_folds_after(two) -> None:  # type: ignore[no-untyped-def]
    alpha, beta = two
    item, _ = alpha.add("action", "Wire X", now=T0)
    # beta's clock is an hour behind: without the causal floor this done sorted before the
    # add, and the add put the item back to open
    closed = beta.change("done", item.id, note="shipped", now=T0 - timedelta(hours=1))
    assert closed.base == "done" and closed.updated_at > item.updated_at
    assert [i.base for i in alpha.items("all")] == ["done"]


def test_re_adding_an_open_title_is_the_same_item_and_a_closed_one_is_new(two) -> None:  # type: ignore[no-untyped-def]
    alpha, beta = two
    first, new = alpha.add("action", "Wire X", now=T0)
    again, new_again = beta.add("action", "  wire   x ", body="more", now=T0 + timedelta(days=1))
    assert (new, new_again, again.id, again.body) == (True, False, first.id, "more")
    alpha.change("done", first.id, note="ok")
    third, new_third = alpha.add("action", "Wire X")
    assert new_third and third.uid != first.uid


def test_ids_and_statuses_are_checked(two) -> None:  # type: ignore[no-untyped-def]
    alpha, _ = two
    item, _ = alpha.add("question", "Why?")
    assert alpha.find(item.id.upper().lstrip("#")).uid == item.uid
    with pytest.raises(BadIdError):
        alpha.find("#xyz1")
    with pytest.raises(StoreError, match="already open"):
        alpha.change("reopen", item.id)
    alpha.change("drop", item.id, note="duplicate of #beef")
    with pytest.raises(StoreError, match="already dropped"):
        alpha.change("drop", item.id, note="again")
    assert alpha.change("reopen", item.id).base == "open"


def test_a_stale_item_can_be_reopened(two) -> None:  # type: ignore[no-untyped-def]
    alpha, _ = two
    item, _ = alpha.add("action", "Old", by="reflector", now=datetime.now(UTC) - timedelta(days=8))
    assert [i.title for i in alpha.items("stale")] == ["Old"] and alpha.items("open") == []
    alpha.change("reopen", item.id, note="still wanted")
    assert [i.title for i in alpha.items("open")] == ["Old"]


def test_context_shows_exactly_the_fresh_open_items_that_list_open_shows(two) -> None:  # type: ignore[no-untyped-def]
    alpha, beta = two
    now = datetime.now(UTC)
    for n, (by, age, kind) in enumerate(
        [
            ("reflector", 6, "action"),
            ("reflector", 8, "handoff"),
            ("person", 29, "question"),
            ("person", 31, "action"),
            ("skill", 10, "handoff"),
            ("skill", 40, "question"),
            ("reflector", 1, "learning"),
        ]
    ):
        alpha.add(kind, f"item {n}", by=by, now=now - timedelta(days=age, minutes=n))
    listed = alpha.items("open", now)
    text, shown, total = beta.context(now=now)
    assert {i.title for i in listed} == {"item 0", "item 2", "item 4"}
    assert [i.title for i in shown] == ["item 4", "item 0", "item 2"]  # handoffs, then newest
    assert total == 3 and text.count("\n- #") == 3


def test_re_adding_a_title_that_held_a_secret_finds_the_redacted_item(two) -> None:  # type: ignore[no-untyped-def]
    alpha, _ = two
    title = "rotate ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    first, _ = alpha.add("action", title)
    assert "REDACTED" in first.title
    again, new = alpha.add("action", title)
    assert (again.uid, new) == (first.uid, False)
