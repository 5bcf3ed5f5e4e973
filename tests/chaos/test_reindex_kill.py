"""SIGKILL in the middle of the first reindex (failpoint ``mid:reindex``).

The lexical index and the manifest were saved before the graph/vector step, and the
pending flag was popped before the work: after a kill between the two steps the next
reindex found every note "unchanged" and nothing asked for one anyway, so the graph stayed
empty until ``reindex --force``. Now the graph's debt is recorded in the manifest before
the lexical step, and a running mark in Huey's storage survives the writer, so the next
drain's recovery runs the reindex and finishes the graph.
"""

from __future__ import annotations

import json
import subprocess

import networkx as nx
import pytest
from support import BIN, transcripts_dir

pytestmark = pytest.mark.chaos


def _graph_nodes(env) -> set[str]:
    path = env.kb / "index" / "graph" / "graph_chunk_entity_relation.graphml"
    return set(nx.read_graphml(path).nodes) if path.exists() else set()


def test_a_kill_between_the_lexical_and_the_graph_step_is_finished_by_the_next_drain(env):
    env["REFLECT_INDEX_VECTORS"] = "1"
    env.invoke("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    proc = subprocess.run(
        [str(BIN / "reflect-jobs"), "drain", "--until-idle", "--max-seconds", "120"],
        env=dict(env, REFLECT_FAILPOINTS="mid:reindex"),
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-800:]
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok"), "the add committed before the kill"
    lexical = json.loads(env.invoke("search", "pnpm", "--mode", "lexical", "--json").stdout)
    assert lexical["results"], "the lexical step ran before the kill"
    assert not _graph_nodes(env), "killed before the graph step"

    env.cli("drain", "--until-idle", "--max-seconds", "120", timeout=300)  # no --force
    assert _graph_nodes(env), "the next drain finished the graph/vector index"
