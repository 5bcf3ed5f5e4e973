"""The MCP tools over the reflection store: ``list_items``, ``add_item``, ``close_item``.

Plain functions like :mod:`.tools` (testable without the SDK), answering wrapped, bounded
text: every answer sits between the recall markers (so a pasted answer is dropped by the
cascade, and markers inside an item are broken), and never exceeds
:data:`reflect_jobs.recall.tools.MAX_RESULT_CHARS`. Writes go through the store, so they
are redacted on the way in and appended as one line to this machine's log like any
``reflections`` command; an agent's item is written ``by: skill`` (a person's 30-day
staleness; ``reflector`` is the background writer's). Closing takes evidence: ``note`` is
required, as on the command line.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .tools import MAX_RESULT_CHARS, ToolError, wrap

#: Items a ``list_items`` answer holds at most (the CLI lists the rest).
MAX_LIST = 50
#: The body excerpt in a listed item.
BODY_CHARS = 300
LIST_STATUSES = ("open", "stale", "done", "dropped", "note", "all")
CLOSE_STATUSES = {"done": "done", "dropped": "drop"}
#: Who an item written through MCP is by.
MCP_AUTHOR = "skill"


def _store(repo: str | None, cwd: str | None = None) -> Any:
    """The store of ``repo`` (a directory or a repo key; default: the server's directory)."""
    from reflect_jobs.reflections.store import open_store
    from reflect_jobs.repo import RepoError

    given = str(repo).strip() if repo is not None and str(repo).strip() else None
    if given is not None:
        given = os.path.expanduser(given)
    try:
        return open_store(given, cwd or os.getcwd())
    except RepoError as exc:
        raise ToolError(str(exc)) from None


def _shown(item: Any) -> dict[str, Any]:
    """An item as a list line shows it: bounded body, no evidence trail."""
    from reflect_jobs.reflections.fold import now_utc

    out = item.to_json(now_utc())
    body = " ".join(str(out.get("body") or "").split())
    out["body"] = body[:BODY_CHARS] + ("…" if len(body) > BODY_CHARS else "")
    out["notes"] = len(out.get("notes") or [])
    return {
        k: out[k] for k in ("id", "kind", "status", "title", "body", "by", "updated_at", "notes")
    }


def list_items_tool(repo: str | None = None, status: str = "open", k: int = 20) -> str:
    """The ``list_items`` tool: a repository's items, newest first, one JSON line each.

    Args:
        repo: A directory (its git root) or a repo key; default the server's directory.
        status: ``open`` (default), ``stale``, ``done``, ``dropped``, ``note`` or ``all``.
        k: At most this many (1–:data:`MAX_LIST`).

    Returns:
        The wrapped answer: a heading with the repo key and counts, then the items.

    Raises:
        ToolError: Unknown status, or no repository.
    """
    status = str(status or "open").strip().lower()
    if status not in LIST_STATUSES:
        raise ToolError(f"unknown status {status!r}; expected one of {', '.join(LIST_STATUSES)}")
    try:
        limit = min(max(int(k), 1), MAX_LIST)
    except (TypeError, ValueError):
        limit = 20
    st = _store(repo)
    try:
        found = st.items(status)
        key = st.repo.display
    finally:
        st.close()
    lines = [
        f"{status} items of {key}: {len(found)}"
        + (f" (first {limit})" if len(found) > limit else "")
    ]
    room = MAX_RESULT_CHARS - len(lines[0]) - 200  # markers and the "more" line
    for n, item in enumerate(found[:limit]):
        line = json.dumps(_shown(item), ensure_ascii=False)
        if len(line) + 1 > room:  # whole lines only: every line stays valid JSON
            lines.append(f"… and {len(found) - n} more: ask with a smaller k or a status")
            break
        lines.append(line)
        room -= len(line) + 1
    return wrap("\n".join(lines), limit=MAX_RESULT_CHARS)


def add_item_tool(kind: str, title: str, body: str | None = None, repo: str | None = None) -> str:
    """The ``add_item`` tool: add an item (an open one of the same kind and title is re-added).

    Args:
        kind: ``action``, ``question``, ``handoff`` (open until closed) or a knowledge kind
            (``learning``, ``decision``, ``gotcha``, ``idea``, ``note``).
        title: One line.
        body: The text (optional).
        repo: A directory or repo key; default the server's directory.

    Returns:
        The wrapped answer whose first line is ``added #id`` (or ``re-added #id``).

    Raises:
        ToolError: A bad kind, an empty title, or no repository.
    """
    from reflect_jobs.reflections.events import EventError
    from reflect_jobs.reflections.store import StoreError

    st = _store(repo)
    try:
        item, new = st.add(str(kind or "").strip(), str(title or ""), body, by=MCP_AUTHOR)
    except (EventError, StoreError) as exc:
        raise ToolError(str(exc)) from None
    finally:
        st.close()
    head = f"{'added' if new else 're-added'} {item.id}"
    return wrap(f"{head}\n{json.dumps(_shown(item), ensure_ascii=False)}")


def close_item_tool(
    id: str,  # noqa: A002 - the tool's public argument name
    note: str,
    status: str = "done",
    repo: str | None = None,
) -> str:
    """The ``close_item`` tool: mark an item ``done`` or ``dropped``, with evidence.

    Args:
        id: The item's id (``#a1b2`` or ``a1b2``, any unique prefix of 4+ hex digits).
        note: The evidence (required: a commit, a file, what answered it).
        status: ``done`` (default) or ``dropped``.
        repo: A directory or repo key; default the server's directory.

    Returns:
        The wrapped answer: ``closed #id as done`` and the item.

    Raises:
        ToolError: No note, a bad status or id, an unknown or already closed item.
    """
    from reflect_jobs.reflections.events import EventError
    from reflect_jobs.reflections.store import StoreError

    if not str(note or "").strip():
        raise ToolError("a note is required: say what closed it (a commit, a file, an answer)")
    op = CLOSE_STATUSES.get(str(status or "").strip().lower())
    if op is None:
        raise ToolError(f"status must be done or dropped, not {str(status)[:40]!r}")
    ident = str(id or "").strip()[:64]
    st = _store(repo)
    try:
        item = st.change(op, ident, note=str(note), by=MCP_AUTHOR)
    except (EventError, StoreError) as exc:
        raise ToolError(str(exc)) from None
    finally:
        st.close()
    shown = _shown(item)
    return wrap(f"closed {item.id} as {shown['status']}\n{json.dumps(shown, ensure_ascii=False)}")
