"""One-off migration of the old whole-file index format (format 1).  Delete on schedule.

Before the SQLite index, a workdir held ``reflect_index_manifest.json`` + ``kv_store_*.json``
+ ``vdb_*.json`` (nano-vectordb matrices) + the GraphML graph, all rewritten on every commit.
Such a workdir is imported into the database once, in one transaction, the first time it is
opened (the façade holds the write lock); the old JSON files are then deleted (the GraphML
stays: it is the export).  If they cannot be read, :class:`IndexFormatError` says to run
``reflect-jobs reindex --force``, which rebuilds the index from the notes anyway.

**Scheduled for removal** after :data:`REMOVE_AFTER` (see ``docs/DEPRECATIONS.md``; a test
fails once the date has passed).  By then every installation has opened its index at least
once with a version that migrates it, and ``reindex --force`` covers any that did not.  To
remove: delete this module and ``tests/graphrag/test_legacy.py``, drop the two calls in
:mod:`.graph_index` (the migration in ``GraphIndex.__init__`` and
:func:`remove_legacy_files` in ``GraphIndex.clear``) and the entry in
``docs/DEPRECATIONS.md``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
from pathlib import Path

import networkx as nx
import numpy as np

from ..sqlite_store import DB_NAME, SCHEMA_VERSION, IndexDB, IndexFormatError

log = logging.getLogger(__name__)

REMOVE_AFTER = dt.date(2027, 6, 1)
LEGACY_MANIFEST = "reflect_index_manifest.json"  # format 1 (whole-file stores)


def present(workdir: Path) -> bool:
    """Whether ``workdir`` still holds an old-format manifest (cheap: one stat).

    Args:
        workdir: The index directory.

    Returns:
        True when there is something to migrate (or leftovers to delete).
    """
    return (Path(workdir) / LEGACY_MANIFEST).exists()


def import_legacy(workdir: Path, db: IndexDB, graphml: Path, settings: dict) -> None:
    """Import a format-1 workdir into ``db`` in one transaction, then delete the old files.

    The caller holds the index's write lock.  A non-empty database means the migration
    already happened (the old files are leftovers): they are only deleted.

    Args:
        workdir: The index directory.
        db: The open, not-in-transaction index database.
        graphml: The GraphML file that was format 1's graph store (now the export).
        settings: The ``settings`` meta to record when the old manifest has none.

    Raises:
        IndexFormatError: The old files cannot be read; the message names the fix.
    """
    wd = Path(workdir)
    if not db.is_empty():  # already migrated; the old files are leftovers
        remove_legacy_files(wd)
        return
    try:
        manifest = json.loads((wd / LEGACY_MANIFEST).read_text(encoding="utf-8"))

        def kv(ns: str) -> dict:
            p = wd / f"kv_store_{ns}.json"
            return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}

        def vdb(ns: str) -> list[tuple[str, bytes, str]]:
            p = wd / f"vdb_{ns}.json"
            if not p.exists():
                return []
            d = json.loads(p.read_text(encoding="utf-8"))
            m = np.frombuffer(base64.b64decode(d["matrix"]), dtype=np.float32)
            m = m.reshape(-1, int(d["embedding_dim"]))
            m = (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)
            return [
                (
                    row["__id__"],
                    m[i].tobytes(),
                    json.dumps({k: v for k, v in row.items() if k != "__id__"}),
                )
                for i, row in enumerate(d["data"])
            ]

        g = nx.read_graphml(graphml) if graphml.exists() else nx.Graph()
        stores = {ns: kv(ns) for ns in ("full_docs", "text_chunks", "community_reports")}
        vectors = {ns: vdb(ns) for ns in ("chunks", "entities", "communities")}
        docs = manifest.get("docs") or {}
    except Exception as exc:
        raise IndexFormatError(
            f"{wd} holds an old-format (whole-file JSON/GraphML) index that cannot be "
            f"migrated ({type(exc).__name__}: {exc}); rebuild it: reflect-jobs reindex --force"
        ) from exc
    log.warning("migrating the old-format index in %s to %s", wd, DB_NAME)
    dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    db.begin()
    try:
        db.wipe()
        db.executemany("INSERT INTO docs VALUES (?, ?)", [(i, dumps(e)) for i, e in docs.items()])
        db.executemany(
            "INSERT OR REPLACE INTO chunk_doc VALUES (?, ?)",
            [(ck, i) for i, e in docs.items() for ck in e.get("chunks", [])],
        )
        for ns, data in stores.items():
            db.executemany(
                "INSERT INTO kv VALUES (?, ?, ?)", [(ns, k, dumps(v)) for k, v in data.items()]
            )
        for ns, rows in vectors.items():
            db.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)", [(ns, *r) for r in rows])
        db.executemany(
            "INSERT INTO nodes VALUES (?, ?)", [(n, dumps(d)) for n, d in g.nodes(data=True)]
        )
        db.executemany(
            "INSERT OR REPLACE INTO edges VALUES (?, ?, ?)",
            [(*sorted((a, b)), dumps(d)) for a, b, d in g.edges(data=True)],
        )
        db.meta_set("version", SCHEMA_VERSION)
        db.meta_set("settings", manifest.get("settings") or settings)
        db.meta_set("communities", manifest.get("communities") or {"built": False})
        db.meta_set("generation", 1)
        db.commit()
    except BaseException:
        db.rollback()
        raise
    remove_legacy_files(wd)


def remove_legacy_files(workdir: Path) -> None:
    """Delete the format-1 manifest and JSON stores (not the GraphML export).

    Args:
        workdir: The index directory.
    """
    for p in Path(workdir).iterdir():
        if p.is_file() and (
            p.name == LEGACY_MANIFEST
            or (p.name.startswith(("kv_store_", "vdb_")) and p.name.endswith(".json"))
        ):
            with contextlib.suppress(OSError):
                p.unlink()
