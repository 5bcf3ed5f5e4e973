"""GraphML check / repair / maintain on an explicit path (SPEC-drain §6.3, B18 fixed)."""

from __future__ import annotations

import os
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest

from reflect_jobs.index.graphml_repair import GraphMLError, check, maintain, repair

nx = pytest.importorskip("networkx")

HEAD = """<?xml version='1.0' encoding='utf-8'?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns \
http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">
  <key id="d7" for="edge" attr.name="order" attr.type="long" />
  <key id="d6" for="edge" attr.name="source_id" attr.type="string" />
  <key id="d5" for="edge" attr.name="description" attr.type="string" />
  <key id="d4" for="edge" attr.name="weight" attr.type="double" />
  <key id="d2" for="node" attr.name="source_id" attr.type="string" />
  <key id="d1" for="node" attr.name="description" attr.type="string" />
  <key id="d0" for="node" attr.name="entity_type" attr.type="string" />
  <graph edgedefault="undirected">
"""
TAIL = "  </graph>\n</graphml>\n"


def node(nid: str, refs: str) -> str:
    """A nano-graphrag-shaped node; ``refs`` is raw XML text of its source_id."""
    return (
        f"    <node id={quoteattr(nid)}>"
        '<data key="d0">"CONCEPT"</data>'
        f'<data key="d1">about {escape(nid)}</data>'
        f'<data key="d2">{refs}</data></node>\n'
    )


def edge(a: str, b: str, refs: str = "chunk-1") -> str:
    return (
        f"    <edge source={quoteattr(a)} target={quoteattr(b)}>"
        '<data key="d4">2.0</data><data key="d5">rel</data>'
        f'<data key="d6">{refs}</data><data key="d7">1</data></edge>\n'
    )


def nano_graph(tmp_path: Path) -> Path:
    """A small graph shaped like nano-graphrag's, written by networkx."""
    g = nx.Graph()
    for i in range(5):
        g.add_node(f'"E{i}"', entity_type='"CONCEPT"', description="d", source_id=f"chunk-{i}")
    for i in range(4):
        g.add_edge(
            f'"E{i}"', f'"E{i + 1}"', weight=1.0, description="r", source_id=f"chunk-{i}", order=1
        )
    path = tmp_path / "graph_chunk_entity_relation.graphml"
    nx.write_graphml(g, path)
    return path


# --------------------------------------------------------------------------- check/repair


def test_valid_graph_passes(tmp_path: Path) -> None:
    path = nano_graph(tmp_path)
    before = path.read_bytes()
    assert check(path)
    result = repair(path)
    assert (result.ok, result.action, result.backup) == (True, "valid", None)
    assert path.read_bytes() == before


def test_doubled_close_is_repaired_with_backup(tmp_path: Path) -> None:
    path = nano_graph(tmp_path)
    good = path.read_bytes()
    broken = good.rstrip() + b"</graph></graphml>\n"
    path.write_bytes(broken)
    assert not check(path)
    result = repair(path)
    assert result.ok and result.action == "repaired"
    assert result.backup == tmp_path / "graph_chunk_entity_relation.graphml.corrupt.bak"
    assert result.backup.read_bytes() == broken
    assert check(path)
    assert path.read_bytes() == good.rstrip() + b"\n"
    assert nx.read_graphml(path).number_of_nodes() == 5


def test_truncated_is_unrepairable_and_untouched(tmp_path: Path) -> None:
    path = nano_graph(tmp_path)
    truncated = path.read_bytes()[: len(path.read_bytes()) // 2]
    path.write_bytes(truncated)
    result = repair(path)
    assert (result.ok, result.action, result.backup) == (False, "unrepairable", None)
    assert "reindex --force" in result.detail
    assert path.read_bytes() == truncated
    assert sorted(os.listdir(tmp_path)) == [path.name]


def test_garbage_after_close_but_broken_inside_is_restored(tmp_path: Path) -> None:
    path = nano_graph(tmp_path)
    data = path.read_bytes().replace(b"<graph ", b"<graph <<", 1) + b"trailing"
    path.write_bytes(data)
    result = repair(path)
    assert not result.ok and result.action == "unrepairable"
    assert path.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == [path.name]


def test_missing_graph(tmp_path: Path) -> None:
    result = repair(tmp_path / "none.graphml")
    assert (result.ok, result.action) == (False, "missing")
    assert not check(tmp_path / "none.graphml")


def test_only_the_given_path_is_touched(tmp_path: Path) -> None:
    shard = tmp_path / "shard" / "graph_chunk_entity_relation.graphml"
    shard.parent.mkdir()
    shard.write_bytes(b"<graphml></graphml>junk")
    main = nano_graph(tmp_path)
    assert repair(main).action == "valid"
    assert shard.read_bytes() == b"<graphml></graphml>junk"


# ------------------------------------------------------------------------------- maintain


def hand_graph(tmp_path: Path) -> Path:
    body = (
        node('"A"', "chunk-1&lt;SEP&gt;chunk-2")
        + node('"B"', "chunk-2")
        + node('"ORPHAN"', "")
        + node('"QUOTED_EMPTY"', '"" &lt;SEP&gt; ""')
        + node('"LINKED_NOREF"', "")
        + node('"ISOLATED"', "chunk-1")
        + node('"LONELY"', "chunk-99")
        + edge('"A"', '"B"')
        + edge('"B"', '"LINKED_NOREF"')
        + edge('"A"', '"GHOST"')
    )
    path = tmp_path / "g.graphml"
    path.write_text(HEAD + body + TAIL, encoding="utf-8")
    assert check(path)
    return path


def test_maintain_three_passes(tmp_path: Path) -> None:
    path = hand_graph(tmp_path)
    stats = maintain(path)
    assert (stats.orphans_pruned, stats.edges_pruned, stats.nodes_relinked) == (2, 1, 1)
    assert check(path)
    assert sorted(os.listdir(tmp_path)) == ["g.graphml"]  # .premaint.bak removed
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and "ns0:" not in text
    g = nx.read_graphml(path)
    assert set(g.nodes) == {'"A"', '"B"', '"LINKED_NOREF"', '"ISOLATED"', '"LONELY"'}
    assert not g.has_edge('"A"', '"GHOST"')
    data = g.edges['"ISOLATED"', '"A"']
    other = g.edges['"A"', '"B"']
    assert set(data) == set(other)  # same data keys as any other edge (B18)
    assert data["weight"] == 1.0 and data["description"] == "relinked: shared source"
    assert data["source_id"] == "chunk-1" and data["order"] == 1
    assert g.degree['"LONELY"'] == 0  # no node shares its ref


def test_maintain_is_idempotent_and_noop_leaves_file_untouched(tmp_path: Path) -> None:
    path = hand_graph(tmp_path)
    maintain(path)
    before = path.read_bytes()
    os.utime(path, (1_000_000, 1_000_000))
    stats = maintain(path)
    assert not stats.changed
    assert path.read_bytes() == before and path.stat().st_mtime == 1_000_000


def test_maintain_networkx_graph_without_work(tmp_path: Path) -> None:
    path = nano_graph(tmp_path)
    before = path.read_bytes()
    assert not maintain(path).changed
    assert path.read_bytes() == before


def test_maintain_declares_edge_keys_when_graph_has_none(tmp_path: Path) -> None:
    head = HEAD.split('  <key id="d7"')[0] + (
        '  <key id="d0" for="node" attr.name="source_id" attr.type="string" />\n'
        '  <graph edgedefault="undirected">\n'
    )
    path = tmp_path / "g.graphml"
    path.write_text(
        head
        + '    <node id="x"><data key="d0">c1</data></node>\n'
        + '    <node id="y"><data key="d0">c1</data></node>\n'
        + TAIL
    )
    stats = maintain(path)
    assert stats.nodes_relinked == 1  # y is linked by then
    g = nx.read_graphml(path)
    assert g.edges["x", "y"]["weight"] == 1.0 and g.edges["x", "y"]["source_id"] == "c1"


def test_maintain_refuses_invalid_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "g.graphml"
    path.write_bytes(b"<graphml><graph>")
    with pytest.raises(GraphMLError):
        maintain(path)
    assert path.read_bytes() == b"<graphml><graph>"
    with pytest.raises(GraphMLError):
        maintain(tmp_path / "none.graphml")


@pytest.mark.chaos
def test_maintain_restores_when_result_does_not_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rewritten graph cannot be read back (EIO at the re-validation): original restored."""
    path = hand_graph(tmp_path)
    before = path.read_bytes()
    monkeypatch.setenv("REFLECT_FAILPOINTS", "graphml:check=oserror:EIO")
    with pytest.raises(GraphMLError, match="restored"):
        maintain(path)
    monkeypatch.delenv("REFLECT_FAILPOINTS")
    assert path.read_bytes() == before
    assert check(path)
    assert sorted(os.listdir(tmp_path)) == ["g.graphml"]
