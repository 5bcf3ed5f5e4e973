"""Graph repair: validate the KB's graphml export, repair it, or rebuild the graph from notes.

Split from :mod:`.maintenance` (the reindex): repair only calls :func:`.maintenance.reindex`
when the graph is beyond repair, so the dependency runs one way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from .. import kb
from . import graphml_repair
from .maintenance import reindex


def graphml_path(kb_path: Path) -> Path:
    """The one graph this KB uses (never a shard found by globbing: B18).

    Args:
        kb_path: The KB root (its directories are created when missing).

    Returns:
        ``index/graph/graph_chunk_entity_relation.graphml`` under it (it may not exist).
    """
    return kb.kb_paths(kb_path).graph / "graph_chunk_entity_relation.graphml"


@dataclass
class RepairReport:
    """What :func:`repair` did: the graphml action and detail, maintenance counts, a rebuild."""

    action: str
    detail: str
    maintained: dict[str, int] | None = None
    rebuilt: bool = False


def repair(
    kb_path: Path, *, maintain: bool = False, vectors: bool, embed_model: str | None = None
) -> RepairReport:
    """Validate/repair the KB's graphml; a graph beyond repair is rebuilt from the notes.

    Args:
        kb_path: The KB root.
        maintain: When the graph is valid or was repaired, also prune orphans and dangling
            edges and relink isolated nodes (:func:`graphml_repair.maintain`).
        vectors: ``Settings.index_vectors``: whether this process keeps a vector/graph index
            (a rebuild of an unrepairable graph needs it).
        embed_model: ``Settings.embed_model`` for that rebuild; ``None`` for the default.

    Returns:
        The :func:`graphml_repair.repair` action (``valid``, ``repaired``, ``unrepairable``
        or ``missing``) and detail; ``rebuilt`` when an unrepairable graph was rebuilt by a
        forced :func:`reindex`; ``maintained`` with the maintenance counts when it ran.
    """
    path = graphml_path(kb_path)
    result = graphml_repair.repair(path)
    report = RepairReport(action=result.action, detail=result.detail)
    if not result.ok and result.action != "missing":
        stats = reindex(kb_path, force=True, vectors=vectors, embed_model=embed_model)
        report.rebuilt = True
        report.detail += f"; rebuilt from notes ({stats.inserted} notes, graph {stats.graph})"
    elif maintain and path.exists():
        report.maintained = asdict(graphml_repair.maintain(path))
    return report
