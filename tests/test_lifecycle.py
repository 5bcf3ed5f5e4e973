"""One vocabulary: every retired status is retired everywhere, in the same way.

Before ``reflect_jobs.lifecycle`` the notes, the ledger, the index and the cascade kept
three sets that disagreed on ``deleted``, ``reverted`` and ``rejected``. Each test here runs
once per retired status, over real note files, a real lexical index and a real SQLite ledger.
"""

from __future__ import annotations

import pytest

from reflect_jobs import kb
from reflect_jobs.cascade import RelatedCandidate, Signal, related_learnings
from reflect_jobs.cascade.prepare import merge_related
from reflect_jobs.index import maintenance, note_docs
from reflect_jobs.index.search import search
from reflect_jobs.ledger import learnings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.ledger.view import LedgerView
from reflect_jobs.lifecycle import (
    CAUSAL_TYPES,
    DEFAULT_CAUSAL_TYPE,
    LEARNING_STATUSES,
    RETIRED_STATUSES,
    is_retired,
    normalise_causal_type,
    normalise_learning_type,
)

NOW = "2026-11-30T00:00:00Z"
RETIRED = sorted(RETIRED_STATUSES)


def test_the_union_of_the_old_sets_is_retired() -> None:
    # kb/render, ledger/learnings and cascade/revision each had one of these.
    old = {"retired", "superseded", "archived", "deleted"} | {"reverted", "rejected"}
    # Later additions: stale_anchors (recall verification, issue 23); proposed is not retired.
    assert old | {"stale_anchors"} == RETIRED_STATUSES
    assert RETIRED_STATUSES | {"active", "proposed"} == LEARNING_STATUSES
    assert not is_retired("active") and not is_retired(None) and not is_retired("")
    assert is_retired(" Retired ") and not is_retired(["retired"])


def test_one_causal_normaliser() -> None:
    assert normalise_causal_type(" Causes ") == "causes"
    assert normalise_causal_type("causes\ninjected: pwned") == DEFAULT_CAUSAL_TYPE
    assert normalise_causal_type(None) == normalise_causal_type(7) == "relates_to"
    assert all(normalise_causal_type(t) == t for t in CAUSAL_TYPES) and len(CAUSAL_TYPES) == 14


def test_one_learning_type_normaliser() -> None:
    assert normalise_learning_type(" Gotcha ") == "gotcha"
    assert normalise_learning_type("gotcha\ninjected") == normalise_learning_type(None)
    assert normalise_learning_type(None) == "bug-fix"


@pytest.mark.parametrize("status", [*RETIRED, "Retired"])
def test_a_retired_note_leaves_search(tmp_path, status: str) -> None:
    keep = kb.write_learning(
        tmp_path,
        {"title": "Pin tenacity", "category": "Tools", "key_insight": "tenacity pinned"},
        created=NOW,
        updated=NOW,
        source_path="t",
        session_id="s",
    )
    gone = kb.write_learning(
        tmp_path,
        {"title": "Use tenacity", "category": "Tools", "key_insight": "tenacity retries"},
        created=NOW,
        updated=NOW,
        source_path="t",
        session_id="s",
    )
    maintenance.reindex(tmp_path, vectors=False)
    assert len(search(tmp_path, "tenacity", mode="lexical", vectors=False).hits) == 2
    if status in RETIRED_STATUSES:
        kb.retire_note(gone.path, status=status, reason="test", now=NOW)
    else:  # a hand edit: not a status retire_note writes, but still a retired note
        text = gone.path.read_text()
        gone.path.write_text(text.replace("status: active", f"status: {status}"))
    stats = maintenance.reindex(tmp_path, vectors=False)
    assert stats.removed == 1
    hits = search(tmp_path, "tenacity", mode="lexical", vectors=False).hits
    assert [h["id"] for h in hits] == [keep.id]
    assert [n.id for n, _ in note_docs.all_active(tmp_path)] == [keep.id]


def _cand(id_: str, status: str) -> RelatedCandidate:
    return RelatedCandidate(id_, "avoid the var keyword", "Code Style", status, 1, "2026-01-01")


@pytest.mark.parametrize("status", [*RETIRED, "Retired"])
def test_a_retired_candidate_is_never_offered_for_revision(status: str) -> None:
    signals = [Signal(1, "HIGH", "correction", "Code Style", "avoid the var keyword", "user")]
    cands = [_cand("lrn-a-000001", "active"), _cand("lrn-b-000002", status)]
    assert [c.id for c, _ in related_learnings(signals, cands)] == ["lrn-a-000001"]
    merged = merge_related([(cands[1], 1.0)], [(cands[0], 0.6), (cands[1], 0.9)])
    assert [c.id for c, _ in merged] == ["lrn-a-000001"]


def _add(session, learning_id: str, signal_hash: str) -> None:
    learnings.upsert_learning(
        session,
        learning_id=learning_id,
        title="avoid var",
        category="Code Style",
        learning_type="convention",
        confidence_num=0.9,
        note_path="/nowhere.md",
        content_hash="h",
        source="t.jsonl",
        session_id="s",
        signal_hash=signal_hash,
        job_id=None,
    )


@pytest.mark.parametrize("status", RETIRED)
def test_a_retired_ledger_row_is_out_of_dedup_and_revision(tmp_path, status: str) -> None:
    db = f"sqlite:///{tmp_path / 'reflect.db'}"
    with session_scope(db) as s:
        _add(s, "lrn-keep-000001", "sig")
        _add(s, "lrn-gone-000002", "sig")
    view = LedgerView(db)
    assert sorted(view.learnings_with_signal_hash("sig")) == ["lrn-gone-000002", "lrn-keep-000001"]
    with session_scope(db) as s:
        assert learnings.retire(s, "lrn-gone-000002", reason="test", status=status)
    with session_scope(db) as s:
        assert not learnings.retire(s, "lrn-gone-000002", reason="again"), "already retired"
        assert s.get(Learning, "lrn-gone-000002").retired_reason == "test"
    assert view.learnings_with_signal_hash("sig") == ["lrn-keep-000001"]
    assert [c.id for c in view.related_candidates()] == ["lrn-keep-000001"]
    with session_scope(db) as s:  # the same learning written again comes back to life
        _add(s, "lrn-gone-000002", "sig")
        assert s.get(Learning, "lrn-gone-000002").status == "active"
