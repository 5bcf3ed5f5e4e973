"""What the MCP tools answer, as plain functions (ARCHITECTURE §13).

Kept apart from :mod:`.mcp_server` so the answers are testable without the SDK. Every result
is text wrapped in the recall markers — the cascade then drops it if it is ever pasted back
into a session — carries ids and paths, and is cut to :data:`MAX_RESULT_CHARS`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from . import block, repokey, store

MAX_RESULT_CHARS = 12_000
MAX_K = 20
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MARKER = re.compile(r"<(/?)(reflect-jobs-context)", re.IGNORECASE)


class ToolError(ValueError):
    """Bad tool input; the message is shown to the agent."""


def defuse(text: str) -> str:
    """Multi-line note text with every recall marker broken (``<`` becomes ``‹``).

    Args:
        text: A note's text.

    Returns:
        The text, unchanged but for marker tags, which can then neither close our block nor
        open one.
    """
    return _MARKER.sub(lambda m: "\u2039" + m.group(1) + m.group(2), text)


def wrap(body: str, *, limit: int = MAX_RESULT_CHARS) -> str:
    """A tool result: the body between the marker lines, cut to fit ``limit``.

    Args:
        body: The text (defused here).
        limit: The whole result's bound, markers included.

    Returns:
        ``<reflect-jobs-context>\\n…\\n</reflect-jobs-context>``.
    """
    room = max(limit - len(block.OPEN) - len(block.CLOSE) - 16, 0)
    body = defuse(body)
    if len(body) > room:
        body = body[:room].rstrip() + "\n… (cut)"
    return f"{block.OPEN}\n{body}\n{block.CLOSE}"


def repo_key_of(repo: str | None) -> str | None:
    """A tool's ``repo`` argument as a repository key.

    Args:
        repo: A directory (its repository's key is computed) or a key as stored
            (``github.com/o/r``); ``None``/``""`` for none.

    Returns:
        The key, or ``None``.
    """
    if not repo or not str(repo).strip():
        return None
    repo = str(repo).strip()
    if os.path.isabs(os.path.expanduser(repo)) and os.path.isdir(os.path.expanduser(repo)):
        ref = repokey.repo_for(os.path.expanduser(repo))
        if ref is not None:
            return ref.key
    return repo[: repokey.MAX_KEY_CHARS]


def _k(k: object, default: int) -> int:
    try:
        value = int(k)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default
    return min(max(value, 1), MAX_K)


def search_tool(
    kb_path: Path,
    query: str,
    *,
    k: int = 5,
    mode: str = "hybrid",
    repo: str | None = None,
    vectors: bool = True,
    embed_model: str | None = None,
) -> str:
    """The ``search`` tool: hits as JSON lines (id, title, score, path; ``"status": "proposed"``
    on a learning no one vouched for yet, ARCHITECTURE §7.1).

    Args:
        kb_path: The KB root.
        query: Free text.
        k: At most this many hits (1–20).
        mode: As ``reflect-jobs search --mode``.
        repo: A directory or repository key: that repository's and the global learnings.
        vectors: ``Settings.index_vectors``.
        embed_model: ``Settings.embed_model``.

    Returns:
        The wrapped result.

    Raises:
        ToolError: Empty query or unknown mode.
    """
    from reflect_jobs.index.search import search

    if not str(query or "").strip():
        raise ToolError("query is empty")
    if mode not in ("hybrid", "naive", "local", "global", "lexical"):
        raise ToolError(f"unknown mode {mode!r}")
    result = search(
        kb_path,
        str(query)[:2000],
        mode=mode,
        k=_k(k, 5),
        vectors=vectors,
        embed_model=embed_model,
        repo_key=repo_key_of(repo),
    )
    lines = [json.dumps(h, ensure_ascii=False) for h in result.hits] or ["no matches"]
    lines += [f"warning: {w}" for w in result.warnings]
    return wrap("\n".join(lines))


def get_tool(kb_path: Path, note_id: str) -> str:
    """The ``get`` tool: one note's full text by id.

    Args:
        kb_path: The KB root.
        note_id: A learning id (``lrn-…``) as the context block or search named it.

    Returns:
        The wrapped note (path first), cut to the bound.

    Raises:
        ToolError: The id is malformed or no such note exists.
    """
    note_id = str(note_id or "").strip()
    if not _ID.match(note_id):
        raise ToolError(f"not a learning id: {note_id[:80]!r}")
    documents = Path(kb_path) / "documents"
    path = documents / f"{note_id}.md"
    if not path.is_file():
        conn = store.open_for_read(store.store_path(kb_path))
        row = None
        if conn is not None:
            try:
                row = store.get_row(conn, note_id)
            finally:
                conn.close()
        candidate = Path(row["path"]) if row and row.get("path") else None
        if candidate is None or candidate.parent.resolve() != documents.resolve():
            raise ToolError(f"no learning {note_id}")
        path = candidate
    text = path.read_text(encoding="utf-8", errors="replace")
    return wrap(f"id: {note_id}\npath: {path}\n\n{text}")


def recent_tool(kb_path: Path, *, repo: str | None = None, k: int = 10) -> str:
    """The ``recent`` tool: the newest learnings of a repository (or of the whole KB).

    Args:
        kb_path: The KB root.
        repo: A directory or repository key; ``None`` for every learning.
        k: At most this many (1–20).

    Returns:
        The wrapped result, one learning per line with id and path.
    """
    conn = store.open_for_read(store.store_path(kb_path))
    if conn is None:
        return wrap("no learnings yet (the context store is built by `reflect-jobs reindex`)")
    try:
        rows = store.recent_rows(conn, repo_key_of(repo), limit=_k(k, 10))
    finally:
        conn.close()
    lines = [f"{block.item_line(r)}  ({block.inert(r.get('path'), 300)})" for r in rows]
    return wrap("\n".join(lines) or "no learnings for this repository yet")


def context_tool(kb_path: Path, cwd: str, *, max_chars: int = block.DEFAULT_MAX_CHARS) -> str:
    """The ``context`` tool: what a new session in ``cwd`` is told.

    Args:
        kb_path: The KB root.
        cwd: The working directory.
        max_chars: The block's budget (200–12,000).

    Returns:
        The block, or a wrapped "nothing to tell".
    """
    from .hook import session_context

    try:
        budget = int(max_chars)
    except (TypeError, ValueError):
        budget = block.DEFAULT_MAX_CHARS
    budget = min(max(budget, 200), MAX_RESULT_CHARS)
    text = session_context(cwd, max_chars=budget, kb_root=str(kb_path))
    return text or wrap("no learnings for this directory yet")
