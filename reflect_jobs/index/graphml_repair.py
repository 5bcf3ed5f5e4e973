"""Check, repair and tidy the nano-graphrag GraphML file (SPEC-drain §6.3).

The caller always passes the path: the original searched ``~/.learnings/**`` and could
"repair" a shard's graph instead of the main one (B18). The graph is derived data — when no
known-safe repair applies we say so and the caller rebuilds it from the notes; we never guess.

Every rewrite keeps a backup, re-validates, and restores the original bytes on failure, so a
repair can only leave the file better or byte-identical.
"""

from __future__ import annotations

import contextlib
import io
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reflect_jobs.faults import failpoint
from reflect_jobs.fsio import atomic_write

#: Parses a whole document (only to validate it; the passes use ElementTree).
_xml_fromstring: Callable[[bytes], ET.Element]
try:  # defusedxml refuses entity-expansion tricks; stdlib expat (>= 2.4.1) also limits them
    from defusedxml.ElementTree import fromstring as _defused_fromstring

    _xml_fromstring = _defused_fromstring
except ImportError:  # pragma: no cover - depends on the environment
    _xml_fromstring = ET.fromstring

GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
_CLOSE = b"</graphml>"
SEP = "<SEP>"  # nano-graphrag's GRAPH_FIELD_SEP
RELINK_DESCRIPTION = "relinked: shared source"


class GraphMLError(Exception):
    """The graph cannot be maintained (missing or invalid); repair or rebuild it first."""


@dataclass
class RepairResult:
    """``ok`` is True iff a valid graph is at the path after the call."""

    ok: bool
    action: str  # "valid" | "repaired" | "unrepairable" | "missing"
    detail: str
    backup: Path | None = None


@dataclass
class MaintainStats:
    """What :func:`maintain` changed: nodes pruned, edges pruned, nodes relinked."""

    orphans_pruned: int = 0
    edges_pruned: int = 0
    nodes_relinked: int = 0

    @property
    def changed(self) -> bool:
        """Whether any pass changed the graph (so the file must be rewritten)."""
        return bool(self.orphans_pruned or self.edges_pruned or self.nodes_relinked)


def _valid_bytes(data: bytes) -> bool:
    try:
        _xml_fromstring(data)
    except Exception:  # ParseError, defusedxml's refusals, ValueError: all mean "not valid"
        return False
    return True


def check(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` exists and is well-formed XML.

    Args:
        path: The GraphML file.

    Returns:
        ``False`` when it cannot be read or does not parse (with defusedxml when it is
        installed, so entity-expansion tricks count as invalid).
    """
    try:
        failpoint("graphml:check")
        data = Path(path).read_bytes()
    except OSError:
        return False
    return _valid_bytes(data)


def _backup_path(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def repair(path: str | os.PathLike[str]) -> RepairResult:
    """Apply the one known-safe fix: drop trailing garbage after the first ``</graphml>``.

    That is the failure seen in practice (two writers appending ``</graph></graphml>``).
    Truncated or otherwise damaged files are reported ``unrepairable`` and left untouched.

    Args:
        path: The GraphML file.

    Returns:
        ``missing`` (not ok) when there is no file; ``valid`` when it already parses;
        ``repaired`` with the ``.corrupt.bak`` backup of the original when truncating after
        the first ``</graphml>`` made it valid; otherwise ``unrepairable`` (not ok) with
        the original bytes in place and no backup left.

    Raises:
        OSError: Reading the file failed other than by its absence, or writing the backup
            or restoring the original failed.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return RepairResult(False, "missing", f"{path}: no graph file (reindex creates it)")
    if _valid_bytes(data):
        return RepairResult(True, "valid", f"{path}: valid")
    end = data.find(_CLOSE)
    if end < 0 or not data[end + len(_CLOSE) :].strip():
        return RepairResult(
            False,
            "unrepairable",
            f"{path}: no known safe repair (no closing tag or nothing trailing); "
            "rebuild the graph from the notes (reindex --force)",
        )
    backup = _backup_path(path, ".corrupt.bak")
    atomic_write(backup, data)
    fixed = data[: end + len(_CLOSE)] + b"\n"
    try:
        atomic_write(path, fixed)
        if check(path):
            dropped = len(data) - end - len(_CLOSE)
            return RepairResult(
                True, "repaired", f"{path}: dropped {dropped} trailing bytes", backup
            )
    except OSError as exc:
        detail = f"{path}: repair write failed: {exc}"
    else:
        detail = f"{path}: still invalid after truncation; original restored"
    atomic_write(path, data)
    with contextlib.suppress(OSError):
        backup.unlink()
    return RepairResult(False, "unrepairable", detail)


# ---------------------------------------------------------------------------------- maintain


def _q(tag: str) -> str:
    return f"{{{GRAPHML_NS}}}{tag}"


def _register_namespaces(data: bytes) -> None:
    """Re-register the file's own prefixes so ElementTree writes ``<graphml>`` not ``ns0:``."""
    for _event, (prefix, uri) in ET.iterparse(io.BytesIO(data), events=("start-ns",)):
        with contextlib.suppress(ValueError):
            ET.register_namespace(prefix, uri)


def _refs(text: str | None) -> list[str]:
    parts = (p.strip().strip("\"'").strip() for p in (text or "").split(SEP))
    return [p for p in parts if p]


class _Graph:
    """Just enough of a GraphML document for the three maintenance passes."""

    def __init__(self, data: bytes) -> None:
        _register_namespaces(data)
        root = ET.fromstring(data)
        self.tree = ET.ElementTree(root)
        self.root = root
        graph = root.find(_q("graph"))
        if graph is None:
            raise GraphMLError("no <graph> element")
        self.graph = graph
        self.keys = {
            (k.get("for", "all"), k.get("attr.name")): k for k in self.root.findall(_q("key"))
        }

    def key_id(self, domain: str, name: str) -> str | None:
        # Not `a or b`: an Element without children is falsy.
        key = self.keys.get((domain, name))
        if key is None:
            key = self.keys.get(("all", name))
        return key.get("id") if key is not None else None

    def ensure_key(self, name: str, attr_type: str) -> str:
        """The edge key id for ``name``, declared (before ``<graph>``) if missing."""
        found = self.key_id("edge", name)
        if found:
            return found
        ids = {k.get("id") for k in self.keys.values()}
        new_id = next(f"d{i}" for i in range(len(ids) + 1, 10_000) if f"d{i}" not in ids)
        key = ET.Element(
            _q("key"), {"id": new_id, "for": "edge", "attr.name": name, "attr.type": attr_type}
        )
        self.root.insert(list(self.root).index(self.graph), key)
        self.keys[("edge", name)] = key
        return new_id

    def nodes(self) -> list[ET.Element]:
        return self.graph.findall(_q("node"))

    def edges(self) -> list[ET.Element]:
        return self.graph.findall(_q("edge"))

    def node_refs(self, node: ET.Element) -> list[str]:
        kid = self.key_id("node", "source_id")
        for data in node.findall(_q("data")):
            if data.get("key") == kid:
                return _refs(data.text)
        return []


def _incident(edges: list[ET.Element]) -> set[str]:
    return {e.get(end) or "" for e in edges for end in ("source", "target")}


def _edge_defaults(g: _Graph) -> dict[str, str]:
    """Values for every declared edge key so a relinked edge looks like any other (B18)."""
    values: dict[str, str] = {}
    for (domain, name), key in g.keys.items():
        if domain not in ("edge", "all") or not name:
            continue
        default = key.find(_q("default"))
        attr_type = key.get("attr.type", "string")
        if default is not None and default.text is not None:
            values[key.get("id", "")] = default.text
        elif attr_type in ("int", "long"):
            values[key.get("id", "")] = "1" if name == "order" else "0"
        elif attr_type in ("float", "double"):
            values[key.get("id", "")] = "0.0"
        elif attr_type == "boolean":
            values[key.get("id", "")] = "false"
        else:
            values[key.get("id", "")] = ""
    return values


def _relink(g: _Graph, stats: MaintainStats) -> None:
    """Pass 3: give each edgeless node that has refs an edge to the first node sharing one."""
    weight = g.ensure_key("weight", "double")
    description = g.ensure_key("description", "string")
    source_id = g.ensure_key("source_id", "string")
    defaults = _edge_defaults(g)
    nodes = g.nodes()
    refs = {n.get("id", ""): g.node_refs(n) for n in nodes}
    linked = _incident(g.edges())
    edge_ids = {e.get("id") for e in g.edges() if e.get("id")}
    counter = 0
    for node in nodes:
        nid = node.get("id", "")
        if nid in linked or not refs[nid]:
            continue
        mine = set(refs[nid])
        partner = next(
            (o for o in refs if o != nid and mine.intersection(refs[o])),
            None,
        )
        if partner is None:
            continue
        attrs = {"source": nid, "target": partner}
        if edge_ids:  # keep ids unique when the file uses them
            while f"relink{counter}" in edge_ids:
                counter += 1
            attrs["id"] = f"relink{counter}"
            edge_ids.add(attrs["id"])
        edge = ET.SubElement(g.graph, _q("edge"), attrs)
        shared = [r for r in refs[nid] if r in set(refs[partner])]
        values = {
            **defaults,
            weight: "1.0",
            description: RELINK_DESCRIPTION,
            source_id: SEP.join(shared),
        }
        for key_id, text in values.items():
            ET.SubElement(edge, _q("data"), {"key": key_id}).text = text
        linked.update((nid, partner))
        stats.nodes_relinked += 1


def maintain(path: str | os.PathLike[str]) -> MaintainStats:
    """Prune orphan nodes, prune dangling edges, relink isolated nodes (SPEC-drain §6.3).

    Raises :class:`GraphMLError` if the file is missing or invalid. With nothing to do the
    file is not rewritten at all (its mtime and bytes stay), so a cron run is free.

    Pass 1 drops nodes with no ``source_id`` refs and no edges; pass 2 drops edges whose
    end no longer exists; pass 3 links each remaining edgeless node that has refs to the
    first node sharing one of them. A rewrite keeps a ``.premaint.bak`` backup until the
    new file validates.

    Args:
        path: The GraphML file.

    Returns:
        How many nodes and edges each pass changed.

    Raises:
        GraphMLError: The file is missing or invalid, has no ``<graph>`` element, or the
            maintained graph did not validate (the original is restored).
        OSError: Writing the backup or the new file failed.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise GraphMLError(f"{path}: missing") from exc
    if not _valid_bytes(data):
        raise GraphMLError(f"{path}: invalid GraphML; run repair (or reindex --force) first")
    g = _Graph(data)
    stats = MaintainStats()

    linked = _incident(g.edges())
    for node in g.nodes():  # pass 1: no learning refs and no edges
        if not g.node_refs(node) and node.get("id", "") not in linked:
            g.graph.remove(node)
            stats.orphans_pruned += 1
    ids = {n.get("id") for n in g.nodes()}
    for edge in g.edges():  # pass 2: an end no longer exists
        if edge.get("source") not in ids or edge.get("target") not in ids:
            g.graph.remove(edge)
            stats.edges_pruned += 1
    _relink(g, stats)  # pass 3
    if not stats.changed:
        return stats

    buf = io.BytesIO()
    g.tree.write(buf, encoding="utf-8", xml_declaration=True)
    backup = _backup_path(path, ".premaint.bak")
    atomic_write(backup, data)
    atomic_write(path, buf.getvalue())  # atomic: on OSError the original is still in place
    if not check(path):
        atomic_write(path, data)
        backup.unlink()
        raise GraphMLError(f"{path}: maintained graph did not validate; original restored")
    backup.unlink()
    return stats
