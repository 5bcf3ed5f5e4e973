"""Properties: the fold ignores read order, and the incremental index equals the pure fold."""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflect_jobs.reflections.events import append_event, make_event
from reflect_jobs.reflections.fold import fold
from reflect_jobs.reflections.index import ReflectionIndex

T0 = datetime(2026, 11, 1, tzinfo=UTC)
UIDS = ["aaaa000000000001", "aaaa000000000002", "bbbb000000000003"]
HOSTS = ["alpha", "beta", "gamma"]

step = st.tuples(
    st.sampled_from(["add", "edit", "done", "drop", "reopen"]),
    st.sampled_from(UIDS),
    st.sampled_from(HOSTS),
    st.integers(min_value=0, max_value=5),  # few distinct instants: many exact ties
    st.sampled_from(["action", "gotcha", "handoff"]),
    st.text(alphabet="abc xyz", min_size=1, max_size=8).filter(str.strip),
)


def build(steps: list[tuple]) -> list[dict]:
    events = []
    for op, uid, host, minute, kind, text in steps:
        at = T0 + timedelta(minutes=minute)
        fields = {
            "add": {"kind": kind, "title": text},
            "edit": {"body": text},
            "done": {"note": text},
            "drop": {"note": text},
            "reopen": {},
        }[op]
        events.append(make_event(op, uid, host=host, by="reflector", now=at, **fields))
    return events


def view(items) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(
        (i.id, i.kind, i.title, i.body, i.base, i.created_at, i.updated_at, len(i.notes))
        for i in items
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(step, min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_the_fold_does_not_depend_on_the_order_events_are_read(steps, rnd) -> None:  # type: ignore[no-untyped-def]
    events = build(steps)
    shuffled = events[:]
    rnd.shuffle(shuffled)
    assert view(fold(events)) == view(fold(shuffled))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=20), st.integers(min_value=0, max_value=2**32))
def test_the_incremental_index_equals_the_pure_fold(steps, seed) -> None:  # type: ignore[no-untyped-def]
    events = build(steps)
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "reflections"
        index = ReflectionIndex(Path(tmp) / "idx.db")
        try:
            for e in events:  # appended one by one, refreshed at random moments
                append_event(logs / f"{e['host']}.jsonl", e)
                if rnd.random() < 0.4:
                    index.refresh("r", logs)
            index.refresh("r", logs)
            assert view(index.items("r")) == view(fold(events))
        finally:
            index.close()
