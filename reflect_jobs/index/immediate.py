"""Bring a few named notes into search and the context store now, without a reindex.

A person's ``add``, ``forget`` and ``restore`` must take effect at once — the next session
start, search and MCP answer — with no worker running and no manual reindex. A full reindex
would do it, but a lexical-only one run here would also mark the graph as owing a full
rebuild (this process keeps no vectors), and waiting for the worker's coalesced reindex
leaves a forgotten learning told in the meantime. So the few notes a person named are
applied to the two stores the hook and search read first:

* a note present in ``documents/``: its lexical document is written with an empty hash and
  its context row written (told statuses) or removed (any other). The empty hash makes the
  next reindex treat the note as changed, so the graph/vector step takes it too;
* a note gone from ``documents/`` (forgotten): its lexical document keeps its hash and gets
  the retired status ``archived``, its context row is removed; the next reindex finds the
  note gone and removes the document and its vectors for good.

Search filters on the lexical status (a vector hit the index does not call active is
dropped), the hook reads only the context store, and MCP ``get`` reads only
``documents/`` — so all of them agree from the moment this returns.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from reflect_jobs import kb
from reflect_jobs.lifecycle import ACTIVE, ARCHIVED, is_told

from .maintenance import lexical_index
from .note_docs import lex_doc, note_bytes

#: The hash a document is written with here: never a real sha256, so the next reindex
#: re-reads the note and brings the graph/vector index in line too.
PENDING_HASH = ""


def _read(kb_path: Path, note_id: str) -> kb.Note | None:
    """The note ``documents/<id>.md`` if it is a readable regular file, else ``None``."""
    path = Path(kb_path) / "documents" / f"{note_id}.md"
    try:
        data = note_bytes(path)  # the reindex's own safe read
        note = kb.parse_note(data.decode("utf-8", errors="replace"))
    except (OSError, kb.NoteError):
        return None
    note.path = path
    return note


def apply_now(kb_path: str | os.PathLike[str], ids: Iterable[str]) -> list[str]:
    """Apply the named notes to the lexical index and the context store.

    Args:
        kb_path: The KB root.
        ids: Note ids a person just added, forgot, restored or demoted.

    Returns:
        One line per store that could not be written (the coalesced reindex still fixes
        it); empty when both took every note.
    """
    from reflect_jobs.recall import refresh, store

    root = Path(kb_path)
    problems: list[str] = []
    notes = {i: _read(root, i) for i in dict.fromkeys(str(x) for x in ids)}
    lex = lexical_index(root)
    try:
        for note_id, note in notes.items():
            if note is None:
                lex.set_status(note_id, ARCHIVED)
            else:
                status = str(note.frontmatter.get("status") or ACTIVE)
                lex.upsert_many([lex_doc(note, PENDING_HASH, status)])
    except sqlite3.Error as exc:
        problems.append(f"lexical index: {type(exc).__name__}: {exc}")
    finally:
        lex.close()
    try:
        conn = store.open_for_write(store.store_path(root))
        try:
            told = [
                refresh.row_from_note(n, PENDING_HASH)
                for n in notes.values()
                if n is not None and is_told(n.frontmatter.get("status"))
            ]
            told_ids = {r["id"] for r in told}
            store.delete_many(conn, [i for i in notes if i not in told_ids])
            store.upsert_many(conn, told)
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        problems.append(f"context store: {type(exc).__name__}: {exc}")
    return problems
