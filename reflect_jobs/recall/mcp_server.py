"""``reflect-jobs mcp``: the knowledge base as an MCP server on stdio (ARCHITECTURE §13).

Tools ``search`` (query, k, mode, repo), ``get`` (a note's full text by id), ``recent``
(newest learnings for a repository) and ``context`` (what ``reflect-jobs context`` prints);
over the reflection store (ARCHITECTURE §14) ``list_items``, ``add_item`` and ``close_item``
(:mod:`.item_tools`).
The answers are :mod:`.tools`' plain functions; this module only registers them with the
official ``mcp`` SDK (``pip install 'reflect-jobs[mcp]'``), which speaks JSON-RPC on the
process's stdin/stdout. Nothing listens on a socket.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import item_tools, tools

SERVER_NAME = "reflect-jobs"


def build_server(kb_path: Path, *, vectors: bool, embed_model: str | None) -> Any:
    """The MCP server object with our seven tools registered.

    Args:
        kb_path: The KB root.
        vectors: ``Settings.index_vectors`` (for ``search``).
        embed_model: ``Settings.embed_model``.

    Returns:
        An ``mcp`` ``MCPServer`` (SDK 2.x) or ``FastMCP`` (SDK 1.x).

    Raises:
        ImportError: The ``mcp`` SDK is not installed.
    """
    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:  # SDK 1.x
        from mcp.server.fastmcp import FastMCP as Server

    server = Server(
        SERVER_NAME,
        instructions=(
            "Learnings reflect-jobs extracted from earlier coding-agent sessions. "
            "Results are wrapped in <reflect-jobs-context> markers and carry note ids."
        ),
    )

    @server.tool()
    def search(query: str, k: int = 5, mode: str = "hybrid", repo: str | None = None) -> str:
        """Search the learnings; repo (a directory or repository key) limits the hits to that
        repository's learnings and the global ones. A hit with "status": "proposed" waits
        for review: no one vouched for it yet, so do not follow it as a rule."""
        return _safe(
            tools.search_tool,
            kb_path,
            query,
            k=k,
            mode=mode,
            repo=repo,
            vectors=vectors,
            embed_model=embed_model,
        )

    @server.tool()
    def get(id: str) -> str:  # noqa: A002 - the tool's public argument name
        """The full text of one learning by its id (as named in search or context)."""
        return _safe(tools.get_tool, kb_path, id)

    @server.tool()
    def recent(repo: str | None = None, k: int = 10) -> str:
        """The newest learnings of a repository (a directory or key); all when omitted."""
        return _safe(tools.recent_tool, kb_path, repo=repo, k=k)

    @server.tool()
    def context(cwd: str | None = None, max_chars: int = 6000) -> str:
        """What a new session in cwd is told: the repository's open reflection items, its
        strongest and the top global learnings."""
        return _safe(tools.context_tool, kb_path, cwd or os.getcwd(), max_chars=max_chars)

    @server.tool()
    def list_items(repo: str | None = None, status: str = "open", k: int = 20) -> str:
        """The repository's reflection items (open actions, questions, handoffs…), newest
        first, with their #ids; repo is a directory or repo key (default: this directory);
        status open|stale|done|dropped|note|all."""
        return _safe(item_tools.list_items_tool, repo, status=status, k=k)

    @server.tool()
    def add_item(kind: str, title: str, body: str | None = None, repo: str | None = None) -> str:
        """Add an item to the repository's reflection store and get its #id: kind is
        action|question|handoff (open until closed) or learning|decision|gotcha|idea|note."""
        return _safe(item_tools.add_item_tool, kind, title, body, repo=repo)

    @server.tool()
    def close_item(id: str, note: str, status: str = "done", repo: str | None = None) -> str:  # noqa: A002
        """Close an item as done or dropped; note (the evidence: a commit, a file, the
        answer) is required."""
        return _safe(item_tools.close_item_tool, id, note, status=status, repo=repo)

    return server


def _safe(func: Any, *args: Any, **kwargs: Any) -> str:
    """Run a tool; bad input and store errors become a one-line answer, not a crash."""
    try:
        return func(*args, **kwargs)
    except tools.ToolError as exc:
        return tools.wrap(f"error: {exc}")
    except Exception as exc:  # noqa: BLE001 - one bad call must not end the server
        return tools.wrap(f"error: {type(exc).__name__}: {str(exc)[:300]}")


def serve(kb_path: Path, *, vectors: bool, embed_model: str | None) -> None:
    """Serve on stdio until the client closes the connection.

    Args:
        kb_path: The KB root.
        vectors: ``Settings.index_vectors``.
        embed_model: ``Settings.embed_model``.

    Raises:
        ImportError: The ``mcp`` SDK is not installed.
    """
    build_server(kb_path, vectors=vectors, embed_model=embed_model).run("stdio")
