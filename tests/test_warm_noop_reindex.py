"""A no-op reindex decides "nothing changed" without importing the model stack (issue item 6).

The verdict comes from the stat manifest and the graph's debt in ``index/files.db``: every
pass that changes what the graph must hold records it before the manifest moves on, and only
a graph update that succeeded clears it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import write_note

from reflect_jobs import kb
from reflect_jobs.index import maintenance

NOOP_REINDEX_IN_A_FRESH_PROCESS = """
import json, sys
from reflect_jobs.cli import main
try:
    main(["reindex", "--json"], standalone_mode=False)
finally:
    heavy = [m for m in ("torch", "sentence_transformers", "transformers", "nano_graphrag")
             if m in sys.modules]
    print(json.dumps({"heavy": heavy}), file=sys.stderr)
"""


def _reindex_in_subprocess(env) -> tuple[dict, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", NOOP_REINDEX_IN_A_FRESH_PROCESS],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    heavy = json.loads(proc.stderr.strip().splitlines()[-1])["heavy"]
    return json.loads(proc.stdout), heavy


def test_lexical_only_change_leaves_the_graph_owed(tmp_path):
    """A vectors-off pass that changed notes must not let a later vectors-on pass skip."""

    def owed():
        m = maintenance.manifest(tmp_path)
        try:
            return m.graph_owed()
        finally:
            m.close()

    write_note(tmp_path, "Pin the docker digest", "floating tags broke the build")
    maintenance.reindex(tmp_path, vectors=False)
    assert owed() == {"force": True, "paths": [], "drop": []}
    m = maintenance.manifest(tmp_path)
    try:
        m.set_graph_owed(None)  # as a vectors-on pass that rebuilt the graph leaves it
    finally:
        m.close()
    assert maintenance.reindex(tmp_path, vectors=False).unchanged == 1
    assert owed() is None, "a no-change pass owes the graph nothing"
    write_note(tmp_path, "Quote FTS5 queries", "a hyphen raised a syntax error")
    maintenance.reindex(tmp_path, vectors=False)
    assert owed() == {"force": True, "paths": [], "drop": []}


@pytest.mark.slow
def test_noop_reindex_imports_no_torch(env):
    """With vectors on: the first pass loads the model; the no-op pass after it loads nothing."""
    env.update(REFLECT_INDEX_VECTORS="1")
    write_note(env.kb, "Pin the docker digest", "floating tags broke the build")
    first, heavy = _reindex_in_subprocess(env)
    assert first["graph"] == "updated", first
    assert "torch" in heavy, "the check below would not see an import"
    noop, heavy = _reindex_in_subprocess(env)
    assert (noop["graph"], noop["inserted"], noop["unchanged"]) == ("unchanged", 0, 1), noop
    assert heavy == [], f"a no-op reindex imported {heavy}"


def test_communities_owed_reads_the_graph_store_row_without_loading_it(tmp_path):
    """The periodic task's pre-check: no graph, current, stale, never built, unreadable."""
    import sqlite3

    assert maintenance.communities_owed(tmp_path) is False  # no graph directory
    graph = kb.kb_paths(tmp_path).graph
    graph.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(graph / "reflect_index.db")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")  # the store's shape
    conn.commit()
    assert maintenance.communities_owed(tmp_path) is True  # never built
    for state, owed in (
        ({"built": True, "stale": False}, False),
        ({"built": True, "stale": True}, True),
    ):
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('communities', ?)", (json.dumps(state),))
        conn.commit()
        assert maintenance.communities_owed(tmp_path) is owed, state
    conn.close()
    (graph / "reflect_index.db").write_bytes(b"not a database" * 100)
    assert maintenance.communities_owed(tmp_path) is True
