"""The MCP tools over the reflection store: ``list_items``, ``search_items``, ``add_item``,
``close_item`` and ``update_items``.

Plain functions like :mod:`.tools` (testable without the SDK), answering wrapped, bounded
text: every answer sits between the recall markers (so a pasted answer is dropped by the
cascade, and markers inside an item are broken), and never exceeds
:data:`reflect_jobs.recall.tools.MAX_RESULT_CHARS`. Writes go through the store, so they
are redacted on the way in and appended as one line to this machine's log like any
``reflections`` command; an agent's item is written ``by: skill`` (a person's 30-day
staleness; ``reflector`` is the background writer's).

The server's boundary (:mod:`.mcp_scope`): reads cover its repository (others only with
``REFLECT_MCP_ALL_REPOS=1``), writes only its repository; adds are bounded per server (20 an
hour, a 4 KiB body); every change needs a note a person can read (8 visible characters).
Invisible characters (zero-width, bidi controls, tag characters) are removed from what an
agent writes before it is stored.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from reflect_jobs.invisible import strip_invisible

from .mcp_scope import ALL, check_body, check_note
from .tools import MAX_RESULT_CHARS, ToolError, _scope, wrap

if TYPE_CHECKING:
    from .mcp_scope import ServerScope

#: Items a ``list_items`` answer holds at most (the CLI lists the rest).
MAX_LIST = 50
#: Hits a ``search_items`` answer holds at most.
MAX_SEARCH = 20
#: Changes one ``update_items`` call may make.
MAX_CHANGES = 20
#: The body excerpt in a listed item.
BODY_CHARS = 300
LIST_STATUSES = ("open", "stale", "done", "dropped", "note", "all")
ADD_KINDS = ("action", "question", "handoff", "learning", "decision", "gotcha", "idea", "note")
CLOSE_STATUSES = {"done": "done", "dropped": "drop"}
#: ``update_items`` operations (``dropped`` is read as ``drop``).
UPDATE_OPS = ("done", "drop", "reopen", "edit")
#: Who an item written through MCP is by.
MCP_AUTHOR = "skill"


def _store(repo: str | None, scope: ServerScope, *, write: bool = False) -> Any:
    """The store a tool call means, inside the server's boundary.

    Args:
        repo: The tool's ``repo`` (omitted: the server's repository).
        scope: The server's boundary.
        write: A write (only the server's own repository) rather than a read.

    Returns:
        The open store (close it).

    Raises:
        ToolError: Outside the boundary, or no repository.
    """
    from reflect_jobs.reflections.store import open_store
    from reflect_jobs.repo import RepoError

    if write:
        given = scope.write_repo(repo)
    else:
        if str(repo or "").strip() == ALL:
            raise ToolError("repo '*' is not for items: name one repository")
        key = scope.read_key(repo)
        given = None if key == scope.key else str(repo).strip()
    try:
        return open_store(given, scope.cwd)
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


def _limit(k: object, default: int, most: int) -> int:
    try:
        return min(max(int(k), 1), most)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default


def _status(status: object, default: str) -> str:
    value = str(status or default).strip().lower()
    if value not in LIST_STATUSES:
        raise ToolError(
            f"unknown status {value[:40]!r}; expected one of {', '.join(LIST_STATUSES)}"
        )
    return value


def _lines(head: str, rows: list[dict[str, Any]], total: int) -> str:
    """A heading and whole JSON lines, as many as fit in the answer's bound."""
    lines = [head]
    room = MAX_RESULT_CHARS - len(head) - 200  # markers and the "more" line
    for n, row in enumerate(rows):
        line = json.dumps(row, ensure_ascii=False)
        if len(line) + 1 > room:  # whole lines only: every line stays valid JSON
            lines.append(f"… and {total - n} more: ask with a smaller k or a status")
            break
        lines.append(line)
        room -= len(line) + 1
    return wrap("\n".join(lines), limit=MAX_RESULT_CHARS)


def list_items_tool(
    repo: str | None = None,
    status: str = "open",
    k: int = 20,
    *,
    scope: ServerScope | None = None,
) -> str:
    """The ``list_items`` tool: a repository's items, newest first, one JSON line each.

    Args:
        repo: Omitted for the server's repository; another only with
            ``REFLECT_MCP_ALL_REPOS=1``.
        status: ``open`` (default), ``stale``, ``done``, ``dropped``, ``note`` or ``all``.
        k: At most this many (1–:data:`MAX_LIST`).
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped answer: a heading with the repo key and counts, then the items.

    Raises:
        ToolError: Unknown status, no repository, or one outside the reads.
    """
    status = _status(status, "open")
    limit = _limit(k, 20, MAX_LIST)
    st = _store(repo, _scope(scope))
    try:
        found = st.items(status)
        key = st.repo.display
    finally:
        st.close()
    head = f"{status} items of {key}: {len(found)}" + (
        f" (first {limit})" if len(found) > limit else ""
    )
    return _lines(head, [_shown(i) for i in found[:limit]], len(found))


def search_items_tool(
    query: str,
    status: str = "all",
    k: int = 10,
    repo: str | None = None,
    *,
    scope: ServerScope | None = None,
) -> str:
    """The ``search_items`` tool: the repository's items matching ``query``, best first.

    Args:
        query: Free text (title, body and closing notes are searched).
        status: ``all`` (default), ``open``, ``stale``, ``done``, ``dropped`` or ``note``.
        k: At most this many (1–:data:`MAX_SEARCH`).
        repo: Omitted for the server's repository; another only with
            ``REFLECT_MCP_ALL_REPOS=1``.
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped answer: a heading, then one JSON line per hit (the list's fields and
        ``score``).

    Raises:
        ToolError: Empty query, unknown status, or a repository outside the reads.
    """
    from reflect_jobs.reflections.fold import derived_status, now_utc

    text = str(query or "").strip()[:500]
    if not text:
        raise ToolError("query is empty: give words of the item's title or body")
    status = _status(status, "all")
    limit = _limit(k, 10, MAX_SEARCH)
    st = _store(repo, _scope(scope))
    try:
        hits = st.search(text, k=limit if status == "all" else limit * 10)
        key = st.repo.display
    finally:
        st.close()
    when = now_utc()
    rows = []
    for item, score in hits:
        if status != "all" and derived_status(item.base, item.by, item.updated_at, when) != status:
            continue
        rows.append({**_shown(item), "score": round(float(score), 4)})
        if len(rows) >= limit:
            break
    head = f"{status} items of {key} matching the query: {len(rows)}"
    return _lines(head, rows, len(rows))


def add_item_tool(
    kind: str,
    title: str,
    body: str | None = None,
    repo: str | None = None,
    *,
    scope: ServerScope | None = None,
) -> str:
    """The ``add_item`` tool: add an item (an open one of the same kind and title is re-added).

    Bounded per server (:class:`.mcp_scope.AddBudget`, :data:`.mcp_scope.MAX_BODY_BYTES`):
    over a bound nothing is written and the error says why and when.

    Args:
        kind: ``action``, ``question``, ``handoff`` (open until closed) or a knowledge kind
            (``learning``, ``decision``, ``gotcha``, ``idea``, ``note``).
        title: One line.
        body: The text (optional, at most 4 KiB).
        repo: Omitted (or naming the server's repository); any other is refused.
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped answer whose first line is ``added #id`` (or ``re-added #id``).

    Raises:
        ToolError: A bad kind, an empty title, a body over 4 KiB, the hourly bound reached,
            or a repository other than the server's.
    """
    from reflect_jobs.reflections.events import EventError
    from reflect_jobs.reflections.store import StoreError

    bounds = _scope(scope)
    kind = str(kind or "").strip().lower()
    if kind not in ADD_KINDS:
        raise ToolError(f"kind must be one of {', '.join(ADD_KINDS)}, not {kind[:40]!r}")
    clean_title = " ".join(strip_invisible(str(title or "")).split())
    if not clean_title:
        raise ToolError("title is empty: one line saying what is open")
    clean_body = check_body(body)
    st = _store(repo, bounds, write=True)
    try:
        bounds.adds.check()
        item, new = st.add(kind, clean_title, clean_body, by=MCP_AUTHOR)
        bounds.adds.record()
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
    *,
    scope: ServerScope | None = None,
) -> str:
    """The ``close_item`` tool: mark an item ``done`` or ``dropped``, with evidence.

    Args:
        id: The item's id (``#a1b2`` or ``a1b2``, any unique prefix of 4+ hex digits).
        note: The evidence (a commit, a file, what answered it): at least 8 visible
            characters.
        status: ``done`` (default) or ``dropped``.
        repo: Omitted (or naming the server's repository); any other is refused.
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped answer: ``closed #id as done`` and the item.

    Raises:
        ToolError: No readable note, a bad status or id, an unknown or already closed item,
            or a repository other than the server's.
    """
    from reflect_jobs.reflections.events import EventError
    from reflect_jobs.reflections.store import StoreError

    evidence = check_note(note)
    op = CLOSE_STATUSES.get(str(status or "").strip().lower())
    if op is None:
        raise ToolError(f"status must be done or dropped, not {str(status)[:40]!r}")
    ident = str(id or "").strip()[:64]
    st = _store(repo, _scope(scope), write=True)
    try:
        item = st.change(op, ident, note=evidence, by=MCP_AUTHOR)
    except (EventError, StoreError) as exc:
        raise ToolError(str(exc)) from None
    finally:
        st.close()
    shown = _shown(item)
    return wrap(f"closed {item.id} as {shown['status']}\n{json.dumps(shown, ensure_ascii=False)}")


def update_items_tool(
    changes: list[dict[str, Any]],
    repo: str | None = None,
    *,
    scope: ServerScope | None = None,
) -> str:
    """The ``update_items`` tool: close, drop, reopen or edit several items, each with its note.

    Every change is tried on its own and answered on its own line, so one bad id does not
    cost the others; the hostile cases are refused as :func:`close_item_tool` refuses them
    (ids validated by the store, titles ≤ 300 characters, bodies ≤ 4 KiB, notes with 8
    visible characters).

    Args:
        changes: Up to :data:`MAX_CHANGES` objects ``{"id", "op", "note", "title"?,
            "body"?}``; ``op`` is one of :data:`UPDATE_OPS`; ``title``/``body`` only for
            ``edit``.
        repo: Omitted (or naming the server's repository); any other is refused.
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped answer: ``applied N of M changes in <repo>``, then one JSON line per
        change, in order: ``{"id", "op", "ok": true, "status", "title"}`` or ``{"id",
        "op", "ok": false, "error"}``.

    Raises:
        ToolError: ``changes`` is not a list of 1–20 objects, or the repository is not
            the server's (nothing is written).
    """
    if not isinstance(changes, list) or not changes:
        raise ToolError("changes must be a list of {id, op, note} objects (at least one)")
    if len(changes) > MAX_CHANGES:
        raise ToolError(
            f"refused: {len(changes)} changes in one call; at most {MAX_CHANGES} (nothing written)"
        )
    st = _store(repo, _scope(scope), write=True)
    results: list[dict[str, Any]] = []
    try:
        for change in changes:
            results.append(_apply(st, change))
        key = st.repo.display
    finally:
        st.close()
    done = sum(1 for r in results if r["ok"])
    head = f"applied {done} of {len(results)} changes in {key}"
    return _lines(head, results, len(results))


def _apply(st: Any, change: object) -> dict[str, Any]:
    """One change of ``update_items``; its result line (never raises for bad input)."""
    from reflect_jobs.reflections.events import EventError
    from reflect_jobs.reflections.store import StoreError

    if not isinstance(change, dict):
        return {"id": None, "op": None, "ok": False, "error": "a change is an object"}
    ident = str(change.get("id") or "").strip()[:64]
    op = str(change.get("op") or "").strip().lower()
    op = "drop" if op == "dropped" else op
    shown_op = op[:20]
    try:
        if op not in UPDATE_OPS:
            raise ToolError(f"op must be one of {', '.join(UPDATE_OPS)}")
        note = check_note(change.get("note"), what="a note (the evidence or the reason)")
        title = body = None
        if op == "edit":
            if change.get("title") is not None:
                title = " ".join(strip_invisible(str(change["title"])).split())
            body = check_body(change.get("body"))
            if not title and body is None:
                raise ToolError("edit needs a title or a body")
        item = st.change(op, ident, note=note, title=title, body=body, by=MCP_AUTHOR)
    except (ToolError, EventError, StoreError) as exc:
        return {"id": ident or None, "op": shown_op, "ok": False, "error": str(exc)[:300]}
    shown = _shown(item)
    return {
        "id": item.id,
        "op": shown_op,
        "ok": True,
        "status": shown["status"],
        "title": shown["title"],
    }
