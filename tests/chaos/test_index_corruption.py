"""Damaged derived indexes: the graphml graph and the lexical FTS5 file.

The notes are the source of truth; both indexes are derived (ARCHITECTURE §8), so any damage to
them must be repairable from the notes with one documented command:

* ``<kb>/index/graph/graph_chunk_entity_relation.graphml`` with trailing garbage (two
  writers appending ``</graph></graphml>`` — the failure seen in the original) is repaired
  in place by ``reflect-jobs repair``; a truncated one is beyond repair and is rebuilt from
  the notes by the same command.
* ``<kb>/index/lexical.db`` overwritten with garbage is recreated by ``reflect-jobs reindex``.

The graph test needs the vector stack (``REFLECT_INDEX_VECTORS=1``: ~5 s model load per
process), so it is the only one here that turns it on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import networkx as nx
import pytest
from support import transcripts_dir

pytestmark = pytest.mark.chaos

NOTE_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"


def _graphml(env) -> Path:
    return env.kb / "index" / "graph" / "graph_chunk_entity_relation.graphml"


def _nodes(path: Path) -> set[str]:
    return set(nx.read_graphml(path).nodes)


def _one_note(env) -> None:
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    env.cli("drain", "--until-idle", "--max-seconds", "120", timeout=240)
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job


def test_graphml_trailing_garbage_repaired_and_truncation_rebuilt(env) -> None:
    env["REFLECT_INDEX_VECTORS"] = "1"
    _one_note(env)  # the add's reindex builds the graph from the note's sidecar
    graph = _graphml(env)
    healthy = graph.read_bytes()
    nodes = _nodes(graph)
    assert nodes, "the note's entities must be in the graph"

    graph.write_bytes(healthy + b"\n  </graph>\n</graphml>\n<!-- second writer -->garbage")
    out = env.cli("repair").stdout
    assert "repaired" in out and "dropped" in out, out
    assert graph.read_bytes().strip() == healthy.strip()
    backup = graph.with_name(graph.name + ".corrupt.bak")
    assert backup.exists(), "the damaged original is kept for a post-mortem"

    graph.write_bytes(healthy[: len(healthy) // 2])  # torn write: no closing tags at all
    out = env.cli("repair", timeout=240).stdout
    assert "unrepairable" in out and "rebuilt from notes (1 notes" in out, out
    assert _nodes(graph) == nodes, "the rebuilt graph holds exactly the notes' entities"


def test_corrupt_fts_index_is_recovered_by_reindex(env) -> None:
    _one_note(env)
    lexical = env.kb / "index" / "lexical.db"
    assert lexical.exists()
    for suffix in ("-wal", "-shm"):
        Path(f"{lexical}{suffix}").unlink(missing_ok=True)
    lexical.write_bytes(os.urandom(64 * 1024))

    out = json.loads(env.cli("reindex", "--json").stdout)
    assert out["inserted"] == 1 and not out["errors"], out
    out = env.invoke("search", "pnpm lockfile", "--mode", "lexical", "--json").stdout
    hits = json.loads(out)["results"]
    assert [h["id"] for h in hits][:1] == [NOTE_ID]


def test_search_on_corrupt_fts_index_fails_with_one_clear_line(env) -> None:
    _one_note(env)
    lexical = env.kb / "index" / "lexical.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{lexical}{suffix}").unlink(missing_ok=True)
    lexical.write_bytes(os.urandom(64 * 1024))
    proc = env.cli("search", "pnpm lockfile", "--mode", "lexical", check=False)
    assert "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert "reindex" in proc.stderr
