"""The knowledge base's own lexical hits, shown beside the reflection items they match.

``reflections search`` answers from both stores: the items from the reflection index,
the learnings from the KB's lexical index (read-only, when it exists; a damaged one is a
warning, never a failed search).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from reflect_jobs.envpaths import kb_root_str


def learnings_search(
    query: str, k: int = 5, environ: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The knowledge base's own lexical hits for ``query``, when it has an index.

    Args:
        query: Free text.
        k: At most this many.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        Hits ``{"id", "title", "score", "path"}`` (empty when the KB has no lexical index
        yet) and warnings (a damaged index is a warning, not a failure of the search).
    """
    db = Path(kb_root_str(environ)) / "index" / "lexical.db"
    if not db.is_file():
        return [], []
    from reflect_jobs.index.lexical import LexicalIndex

    try:
        with LexicalIndex(db) as lex:
            hits = []
            for doc_id, score in lex.search(query, k):
                meta = lex.lookup(doc_id) or {}
                hits.append(
                    {
                        "id": doc_id,
                        "title": meta.get("title"),
                        "score": score,
                        "path": meta.get("path"),
                    }
                )
            return hits, []
    except sqlite3.DatabaseError as exc:
        return [], [f"the learnings index is damaged ({exc}): run `reflect-jobs reindex`"]
