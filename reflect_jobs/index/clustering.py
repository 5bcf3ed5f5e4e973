"""Hierarchical community detection for the entity graph (louvain via networkx).

nano-graphrag clusters with graspologic's hierarchical leiden, a heavy dependency we do not
install.  networkx's louvain gives the same kind of result: ``louvain_partitions`` yields
successively coarser partitions, which we turn into nano-graphrag's ``clusters`` node
attribute (a JSON list of ``{"level", "cluster"}``, level 0 the coarsest).  It is
deterministic for a given graph (row order) and seed, so a rebuilt index clusters the same.

Singleton communities and communities unchanged from the level above get no cluster id:
they would only produce empty or duplicate community reports.
"""

from __future__ import annotations

import networkx as nx


def hierarchical_communities(
    g: nx.Graph, *, seed: int = 0, max_levels: int = 3
) -> dict[str, list[dict]]:
    """Assign nodes to nested communities, coarsest level first.

    Args:
        g: The graph; edge attribute ``weight`` is used.
        seed: Random seed for louvain (taken modulo 2**32).
        max_levels: How many levels to keep (the coarsest ones).

    Returns:
        node -> ``[{"level": l, "cluster": id}, ...]`` for the nodes in at least one kept
        community; cluster ids are unique across levels, numbered largest community first.
    """
    if g.number_of_nodes() == 0:
        return {}
    seed = int(seed) % (2**32)
    # louvain_partitions yields finest -> coarsest; nano-graphrag's level 0 is the coarsest.
    parts = [list(p) for p in nx.community.louvain_partitions(g, weight="weight", seed=seed)]
    if not parts:
        parts = [[{n} for n in g.nodes]]
    levels = list(reversed(parts))[: int(max_levels)]
    assign: dict[str, list[dict]] = {}
    next_id = 0
    parent_of: dict[str, frozenset] = {}
    for level, partition in enumerate(levels):
        this_of: dict[str, frozenset] = {}
        for comm in sorted(partition, key=lambda c: (-len(c), min(c))):
            fz = frozenset(comm)
            for n in comm:
                this_of[n] = fz
            if len(comm) < 2:
                continue  # singletons make no useful report
            if level > 0 and parent_of.get(next(iter(comm))) == fz:
                continue  # unchanged from the level above: no duplicate report
            for n in comm:
                assign.setdefault(n, []).append({"level": level, "cluster": next_id})
            next_id += 1
        parent_of = this_of
    return assign
