"""Graph storage of the graph index: the entity graph as rows, networkx only on demand.

nano-graphrag's ``NetworkXStorage`` holds the graph in memory and rewrites the whole GraphML
file on every commit.  :class:`SQLiteGraphStorage` subclasses it (so nano-graphrag's
community-schema code keeps working) but stores nodes and edges as JSON rows of the
``nodes``/``edges`` tables of the shared :class:`~reflect_jobs.index.sqlite_store.IndexDB`,
written inside the index's transaction.  Point reads and writes (``get_node``, ``has_edge``,
neighbours, ...) go to SQLite; a networkx graph is materialised only when clustering,
community reports, GraphML export or a caller ask for :attr:`SQLiteGraphStorage.graph`, and
is then kept in sync on writes.  Clustering is :mod:`reflect_jobs.index.clustering`; the
GraphML file is only an export (:meth:`SQLiteGraphStorage.export_graphml`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
from nano_graphrag._storage import NetworkXStorage

from .clustering import hierarchical_communities
from .sqlite_store import config_db, dumps_json


def _ekey(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass
class SQLiteGraphStorage(NetworkXStorage):
    """The entity graph in the ``nodes``/``edges`` tables, networkx only on demand.

    Point reads and writes go to
    SQLite; a networkx graph is materialised only on demand (:attr:`graph`: clustering,
    community schema, GraphML export) and then kept in sync on writes.  Clustering is
    louvain (:mod:`reflect_jobs.index.clustering`; no graspologic) and only runs when
    :meth:`~reflect_jobs.index.graphrag.GraphIndex.rebuild_communities` asks for it.

    The async methods are nano-graphrag's ``BaseGraphStorage`` interface; the sync ones are
    what our own insert/remove/query code calls."""

    def __post_init__(self) -> None:  # no GraphML load: SQLite is the store
        self._db = config_db(self.global_config)
        self._nx: nx.Graph | None = None
        self._clustering_algorithms = {
            "louvain": self._louvain_clustering,
            "leiden": self._louvain_clustering,
        }
        self._node_embed_algorithms: dict[str, Callable[[], Awaitable[Any]]] = {}  # none
        self._db.register(self)

    def invalidate(self) -> None:
        """Drop the networkx graph (after a rollback or another process's commit)."""
        self._nx = None

    @property
    def loaded(self) -> bool:
        """Whether the networkx graph is materialised."""
        return self._nx is not None

    @property
    def graph(self) -> nx.Graph:
        """The whole graph in networkx (loaded once, O(graph); then kept in sync on writes)."""
        if self._nx is None:
            g: nx.Graph[str] = nx.Graph()
            with self._db.snapshot():
                nodes = self._db.execute("SELECT name, data FROM nodes ORDER BY rowid").fetchall()
                edges = self._db.execute("SELECT a, b, data FROM edges ORDER BY rowid").fetchall()
            g.add_nodes_from((n, json.loads(d)) for n, d in nodes)
            g.add_edges_from((a, b, json.loads(d)) for a, b, d in edges)
            self._nx = g
        return self._nx

    # nano-graphrag's NetworkXStorage methods read ``self._graph``
    @property
    def _graph(self) -> nx.Graph:
        return self.graph

    async def index_done_callback(self):
        """Nothing to flush: the GraphIndex transaction is the commit (no GraphML write)."""
        pass

    # ---------------------------------------------------------------- sync point access

    def node_data(self, n: str) -> dict | None:
        """A copy of one node's data.

        Args:
            n: Node name.

        Returns:
            Its attributes, or None when there is no such node.
        """
        if self._nx is not None:
            d = self._nx.nodes.get(n)
            return None if d is None else dict(d)
        row = self._db.execute("SELECT data FROM nodes WHERE name = ?", (n,)).fetchone()
        return None if row is None else json.loads(row[0])

    def edge_data(self, a: str, b: str) -> dict | None:
        """A copy of one (undirected) edge's data.

        Args:
            a: One end.
            b: The other end.

        Returns:
            Its attributes, or None when there is no such edge.
        """
        if self._nx is not None:
            d = self._nx.edges.get((a, b))
            return None if d is None else dict(d)
        row = self._db.execute(
            "SELECT data FROM edges WHERE a = ? AND b = ?", _ekey(a, b)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def neighbours(self, n: str) -> list[tuple[str, dict]]:
        """A node's neighbours with the data of the connecting edges.

        Args:
            n: Node name.

        Returns:
            ``(neighbour, edge data)`` in edge insertion order; empty for an unknown node.
        """
        if self._nx is not None:
            if n not in self._nx:
                return []
            return [(m, d) for m, d in self._nx[n].items()]
        rows = self._db.execute(
            "SELECT b, data, rowid FROM edges WHERE a = ? "
            "UNION ALL SELECT a, data, rowid FROM edges WHERE b = ? AND a != ? ORDER BY 3",
            (n, n, n),
        ).fetchall()
        return [(m, json.loads(d)) for m, d, _ in rows]

    def degree(self, n: str) -> int:
        """How many edges a node has.

        Args:
            n: Node name.

        Returns:
            Its degree (0 for an unknown node).
        """
        if self._nx is not None:
            return self._nx.degree(n) if self._nx.has_node(n) else 0
        row = self._db.execute(
            "SELECT (SELECT count(*) FROM edges WHERE a = ?) + "
            "(SELECT count(*) FROM edges WHERE b = ?)",
            (n, n),
        ).fetchone()
        return int(row[0])

    def put_node(self, n: str, data: dict) -> None:
        """Set a node's data (replacing it), creating the node if needed.

        Args:
            n: Node name.
            data: Its new attributes.
        """
        self._db.execute(
            "INSERT INTO nodes VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET data = excluded.data",
            (n, dumps_json(data)),
        )
        if self._nx is not None:
            if n in self._nx:
                self._nx.nodes[n].clear()
            self._nx.add_node(n, **data)

    def put_edge(self, a: str, b: str, data: dict) -> None:
        """Set an edge's data (replacing it); missing end nodes are created empty, as
        networkx does.

        Args:
            a: One end.
            b: The other end.
            data: Its new attributes.
        """
        for n in (a, b):
            self._db.execute("INSERT OR IGNORE INTO nodes VALUES (?, '{}')", (n,))
        self._db.execute(
            "INSERT INTO edges VALUES (?, ?, ?) "
            "ON CONFLICT(a, b) DO UPDATE SET data = excluded.data",
            (*_ekey(a, b), dumps_json(data)),
        )
        if self._nx is not None:
            if self._nx.has_edge(a, b):
                self._nx.edges[a, b].clear()
            self._nx.add_edge(a, b, **data)

    def remove_node(self, n: str) -> None:
        """Delete a node and its edges (no-op for an unknown node).

        Args:
            n: Node name.
        """
        self._db.execute("DELETE FROM edges WHERE a = ? OR b = ?", (n, n))
        self._db.execute("DELETE FROM nodes WHERE name = ?", (n,))
        if self._nx is not None and n in self._nx:
            self._nx.remove_node(n)

    def remove_edge(self, a: str, b: str) -> None:
        """Delete an edge (no-op for an unknown edge); its end nodes stay.

        Args:
            a: One end.
            b: The other end.
        """
        self._db.execute("DELETE FROM edges WHERE a = ? AND b = ?", _ekey(a, b))
        if self._nx is not None and self._nx.has_edge(a, b):
            self._nx.remove_edge(a, b)

    def number_of_nodes(self) -> int:
        """How many nodes the graph has (one count query while not materialised).

        Returns:
            The node count.
        """
        if self._nx is not None:
            return self._nx.number_of_nodes()
        return self._db.execute("SELECT count(*) FROM nodes").fetchone()[0]

    # ---------------------------------------------------------------- BaseGraphStorage API

    async def has_node(self, node_id: str) -> bool:
        """Whether the node exists.

        Args:
            node_id: Node name.

        Returns:
            ``True`` when it does.
        """
        if self._nx is not None:
            return self._nx.has_node(node_id)
        return (
            self._db.execute("SELECT 1 FROM nodes WHERE name = ?", (node_id,)).fetchone()
            is not None
        )

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        """Whether the (undirected) edge exists.

        Args:
            source_node_id: One end.
            target_node_id: The other end.

        Returns:
            ``True`` when it does.
        """
        return self.edge_data(source_node_id, target_node_id) is not None

    async def get_node(self, node_id: str) -> dict | None:
        """A copy of one node's data (see :meth:`node_data`).

        Args:
            node_id: Node name.

        Returns:
            Its attributes, or None when there is no such node.
        """
        return self.node_data(node_id)

    async def get_edge(self, source_node_id: str, target_node_id: str) -> dict | None:
        """A copy of one edge's data (see :meth:`edge_data`).

        Args:
            source_node_id: One end.
            target_node_id: The other end.

        Returns:
            Its attributes, or None when there is no such edge.
        """
        return self.edge_data(source_node_id, target_node_id)

    async def node_degree(self, node_id: str) -> int:
        """A node's degree (see :meth:`degree`).

        Args:
            node_id: Node name.

        Returns:
            Its degree (0 for an unknown node).
        """
        return self.degree(node_id)

    async def edge_degree(self, src_id: str, tgt_id: str) -> int:
        """The rank nano-graphrag gives an edge: the sum of its ends' degrees.

        Args:
            src_id: One end.
            tgt_id: The other end.

        Returns:
            ``degree(src_id) + degree(tgt_id)``.
        """
        return self.degree(src_id) + self.degree(tgt_id)

    async def get_node_edges(self, source_node_id: str):
        """A node's edges, as nano-graphrag's local query walks them.

        Args:
            source_node_id: Node name.

        Returns:
            ``(source_node_id, neighbour)`` pairs in edge insertion order, or ``None`` for
            an unknown node.
        """
        if not await self.has_node(source_node_id):
            return None
        return [(source_node_id, m) for m, _ in self.neighbours(source_node_id)]

    async def upsert_node(self, node_id: str, node_data: dict[str, str]):
        """Merge ``node_data`` into the node's attributes, creating it if needed.

        Args:
            node_id: Node name.
            node_data: Attributes to set; others the node has are kept.
        """
        # networkx's add_node(**data) merges attributes: keep that
        self.put_node(node_id, {**(self.node_data(node_id) or {}), **node_data})

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict):
        """Merge ``edge_data`` into the edge's attributes, creating it (and its ends) if needed.

        Args:
            source_node_id: One end.
            target_node_id: The other end.
            edge_data: Attributes to set; others the edge has are kept.
        """
        old = self.edge_data(source_node_id, target_node_id) or {}
        self.put_edge(source_node_id, target_node_id, {**old, **edge_data})

    async def clustering(self, algorithm: str):
        """Assign every node its hierarchical communities (the ``clusters`` attribute).

        Both names run louvain (:func:`reflect_jobs.index.clustering.hierarchical_communities`);
        the graph is materialised and every node row rewritten.

        Args:
            algorithm: ``louvain`` or ``leiden``.

        Raises:
            ValueError: Any other algorithm.
        """
        if algorithm not in self._clustering_algorithms:
            raise ValueError(f"Clustering algorithm {algorithm} not supported")
        await self._clustering_algorithms[algorithm]()
        # the one O(graph) write: every node's ``clusters`` attribute
        self._db.executemany(
            "UPDATE nodes SET data = ? WHERE name = ?",
            [(dumps_json(d), n) for n, d in self.graph.nodes(data=True)],
        )

    async def _louvain_clustering(self):
        g = self.graph
        for _, data in g.nodes(data=True):
            data.pop("clusters", None)
        assign = hierarchical_communities(
            g,
            seed=int(self.global_config.get("graph_cluster_seed", 0)),
            max_levels=int(self.global_config.get("addon_params", {}).get("max_cluster_levels", 3)),
        )
        for n, cl in assign.items():
            g.nodes[n]["clusters"] = json.dumps(cl)

    # ---------------------------------------------------------------- export

    def export_graphml(self, path: str | os.PathLike[str]) -> None:
        """Write the graph as GraphML atomically (tmp + fsync + rename).  O(graph).

        Args:
            path: The file to write; the temporary file is made next to it.
        """
        path = os.fspath(path)
        d = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".graphml", dir=d)
        os.close(fd)
        try:
            nx.write_graphml(self.graph, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
