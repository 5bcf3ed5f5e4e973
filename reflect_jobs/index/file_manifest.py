"""The stat/hash manifest of the notes as last indexed (``index/files.db``).

Split from ``maintenance``: what reindex skips (a stat per note instead of a read and a
hash), what search asks cheaply (does the index lag the notes?), and what the graph/vector
step still owes after a pass that did not finish (``graph_owed``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from reflect_jobs import kb


class FileManifest:
    """``path -> (size, mtime_ns, sha256)`` of every note as last indexed, and the folder's mtime.

    Lets reindex skip reading unchanged notes (a stat per note instead of a read + hash:
    +1 note on a 5,000-note KB stays flat) and lets search tell cheaply whether the index
    lags the notes (the folder's mtime moves on every atomic write, rename or delete).
    """

    def __init__(self, db_path: Path) -> None:
        """Open (or create) the manifest.

        Args:
            db_path: The SQLite file, usually ``kb/index/files.db``.
        """
        self.conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha TEXT)"
        )
        self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")

    def load(self) -> dict[str, tuple[int, int, str]]:
        """Every recorded note.

        Returns:
            ``{path: (size, mtime_ns, sha256)}``.
        """
        return {
            p: (sz, mt, sha)
            for p, sz, mt, sha in self.conn.execute("SELECT path, size, mtime_ns, sha FROM files")
        }

    def save(
        self, upserts: list[tuple[str, int, int, str]], deletes: list[str], docs_mtime_ns: int
    ) -> None:
        """Record one reindex's changes in one transaction.

        Args:
            upserts: ``(path, size, mtime_ns, sha256)`` of each note that was read.
            deletes: Paths no longer on disk.
            docs_mtime_ns: The documents folder's mtime when the reindex started.
        """
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", upserts)
            self.conn.executemany("DELETE FROM files WHERE path = ?", [(d,) for d in deletes])
            self.conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('documents_mtime_ns', ?)",
                (str(docs_mtime_ns),),
            )

    def clear(self) -> None:
        """Forget every note and the folder's mtime (a forced reindex starts from nothing)."""
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("DELETE FROM files")
            self.conn.execute("DELETE FROM meta")

    def graph_owed(self) -> dict[str, Any] | None:
        """What the graph/vector index still owes from a pass that did not finish.

        Returns:
            ``{"force": bool, "paths": [note paths to (re)insert], "drop": [ids]}``, or
            ``None`` when the graph is in step with the lexical index.
        """
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'graph_owed'").fetchone()
        if not row:
            return None
        try:
            owed = json.loads(row[0])
        except ValueError:
            return {"force": True, "paths": [], "drop": []}  # unreadable: rebuild the graph
        return owed if isinstance(owed, dict) else {"force": True, "paths": [], "drop": []}

    def set_graph_owed(self, owed: dict[str, Any] | None) -> None:
        """Record (or, with ``None``, clear) what the graph/vector index owes.

        Written before the lexical index and the manifest move on, cleared once the graph
        step succeeded, so a pass killed in between (``mid:reindex``) is finished by the
        next one instead of being taken for "unchanged".

        Args:
            owed: See :meth:`graph_owed`.
        """
        with self.conn:
            self.conn.execute("BEGIN")
            if owed is None:
                self.conn.execute("DELETE FROM meta WHERE key = 'graph_owed'")
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('graph_owed', ?)", (json.dumps(owed),)
                )

    def documents_mtime_ns(self) -> int | None:
        """The documents folder's mtime recorded by the last reindex.

        Returns:
            Nanoseconds since the epoch, or ``None`` before the first reindex (or after
            :meth:`clear`).
        """
        row = self.conn.execute(
            "SELECT value FROM meta WHERE key = 'documents_mtime_ns'"
        ).fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def manifest(kb_path: Path) -> FileManifest:
    """Open the KB's file manifest (``index/files.db``), creating the KB's directories.

    Args:
        kb_path: The KB root.

    Returns:
        An open :class:`FileManifest`; the caller closes it.
    """
    return FileManifest(kb.kb_paths(kb_path).index / "files.db")


def index_lags(kb_path: Path) -> bool:
    """True when notes changed since the last reindex (cheap: two stats and one row).

    "Changed" means the documents folder's mtime differs from the one recorded, which every
    atomic write, rename or delete moves; a note edited in place without a rename is not
    seen. Before the first reindex it is true as soon as there is a note.

    Args:
        kb_path: The KB root.

    Returns:
        Whether a reindex is owed; ``False`` when ``documents/`` does not exist.
    """
    paths = kb.kb_paths(kb_path)
    if not paths.documents.is_dir():
        return False
    m = manifest(kb_path)
    try:
        recorded = m.documents_mtime_ns()
    finally:
        m.close()
    current = paths.documents.stat().st_mtime_ns
    has_notes = (
        any(p.suffix == ".md" for p in paths.documents.iterdir()) if recorded is None else True
    )
    return (recorded is None and has_notes) or (recorded is not None and recorded != current)
