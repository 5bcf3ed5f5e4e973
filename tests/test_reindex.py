"""Incremental reindex over real note files: what changes is re-read, nothing else."""

from __future__ import annotations

import os

import pytest
from support import write_note

from reflect_jobs import kb
from reflect_jobs.index import maintenance
from reflect_jobs.index.search import search

NOW = "2026-11-30T00:00:00Z"


def test_incremental_reindex_reads_only_changed_notes(tmp_path):
    a = write_note(tmp_path, "Pin the docker digest", "floating tags broke the build")
    write_note(tmp_path, "Quote FTS5 queries", "a hyphen raised a syntax error")
    first = maintenance.reindex(tmp_path, vectors=False)
    assert (first.inserted, first.unchanged) == (2, 0)
    again = maintenance.reindex(tmp_path, vectors=False)
    assert (again.inserted, again.unchanged, again.removed) == (0, 2, 0)
    text = a.path.read_text().replace(
        "floating tags broke the build", "a moving tag pulled an ARM-only image"
    )
    a.path.write_text(text)
    edited = maintenance.reindex(tmp_path, vectors=False)
    assert (edited.inserted, edited.unchanged) == (1, 1)
    assert [
        h["id"] for h in search(tmp_path, "ARM-only image", mode="lexical", vectors=False).hits
    ] == [a.id]


def test_deleted_and_retired_notes_leave_search(tmp_path):
    a = write_note(tmp_path, "Use tenacity for retries", "sleep loops hammer the API")
    b = write_note(tmp_path, "Use tenacity jitter", "retries in lockstep cause thundering herds")
    maintenance.reindex(tmp_path, vectors=False)
    assert len(search(tmp_path, "tenacity", mode="lexical", vectors=False).hits) == 2
    kb.retire_note(a.path, status="retired", reason="superseded", now=NOW)
    os.unlink(b.path)
    stats = maintenance.reindex(tmp_path, vectors=False)
    assert stats.removed == 2
    assert search(tmp_path, "tenacity", mode="lexical", vectors=False).hits == []
    assert maintenance.reindex(tmp_path, vectors=False).inserted == 0, (
        "a retired note is not re-read"
    )


def test_search_warns_when_the_index_lags_the_notes(tmp_path):
    write_note(tmp_path, "Close redis pipelines", "leaked pipelines exhausted the pool")
    assert search(tmp_path, "redis", mode="lexical", vectors=False).warnings, "never indexed"
    maintenance.reindex(tmp_path, vectors=False)
    assert search(tmp_path, "redis", mode="lexical", vectors=False).warnings == []
    write_note(tmp_path, "Set busy_timeout", "writers failed under contention")
    assert "lags" in search(tmp_path, "redis", mode="lexical", vectors=False).warnings[0]


@pytest.mark.chaos
def test_force_rebuilds_everything_and_a_corrupt_index_is_rebuilt(tmp_path):
    write_note(tmp_path, "Fsync the directory", "renamed file vanished after power loss")
    maintenance.reindex(tmp_path, vectors=False)
    assert maintenance.reindex(tmp_path, vectors=False, force=True).inserted == 1
    (tmp_path / "index" / "lexical.db").write_bytes(b"garbage" * 100)
    stats = maintenance.reindex(tmp_path, vectors=False)
    assert stats.inserted == 1
    assert search(tmp_path, "power loss", mode="lexical", vectors=False).hits


@pytest.mark.chaos
def test_damaged_graph_store_is_rebuilt_from_the_notes(tmp_path):
    """The vector/graph store is derived: a damaged one is rebuilt, never a stuck index."""
    a = write_note(tmp_path, "Pin the docker digest", "floating tags broke the build")
    maintenance.reindex(tmp_path, vectors=True)
    store = tmp_path / "index" / "graph" / "reflect_index.db"
    assert store.exists()
    for suffix in ("-wal", "-shm"):
        (tmp_path / "index" / "graph" / f"reflect_index.db{suffix}").unlink(missing_ok=True)
    store.write_bytes(b"not a database" * 512)
    write_note(tmp_path, "Quote FTS5 queries", "a hyphen raised a syntax error")
    stats = maintenance.reindex(tmp_path, vectors=True)
    assert stats.graph == "updated", stats
    assert any("rebuilt from the notes" in e for e in stats.errors)
    from reflect_jobs.index.graphrag import GraphIndex

    assert GraphIndex(tmp_path / "index" / "graph").doc_ids() >= {a.id}
