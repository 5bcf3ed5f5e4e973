"""What the MCP tools answer, as plain functions (ARCHITECTURE §13).

Kept apart from :mod:`.mcp_server` so the answers are testable without the SDK. Every result
is text wrapped in the recall markers — the cascade then drops it if it is ever pasted back
into a session — carries ids and paths, and is cut to :data:`MAX_RESULT_CHARS`. A failure is
a :class:`ToolError` whose text is one line (the server answers it with ``isError``).

Every read stays inside the server's boundary (:class:`.mcp_scope.ServerScope`: its
repository and the global learnings), and a note is read only as a regular file inside
``documents/``, never through a symbolic link (:func:`reflect_jobs.fsio.read_inside`): a note
that links to ``~/.ssh/id_ed25519`` is an error, not the key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reflect_jobs.repo import key_of

from . import block, fading, store
from .tool_errors import ToolError

if TYPE_CHECKING:
    from reflect_jobs.kb.parse import Note

    from .mcp_scope import ServerScope

MAX_RESULT_CHARS = 12_000
MAX_K = 20
#: The search modes (``reflect-jobs search --mode``), offered as an enum in the tool schema.
MODES = ("hybrid", "naive", "local", "global", "lexical")
#: A search hit's rule and snippet, in characters (most answers then need no ``get``).
HIT_RULE_CHARS = 300
HIT_SNIPPET_CHARS = 240
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MARKER = re.compile(r"<(/?)(reflect-jobs-context)", re.IGNORECASE)
_WORD = re.compile(r"\w{3,}", re.UNICODE)


def one_line(text: object, limit: int = 500) -> str:
    """An error text as the agent gets it: one line, markers broken, bounded.

    Args:
        text: The message.
        limit: At most this many characters.

    Returns:
        The line.
    """
    return block.inert(defuse(str(text)), limit)


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
    """A tool's ``repo`` argument as a repository key (:func:`reflect_jobs.repo.key_of`).

    Args:
        repo: A directory (its repository's key is computed) or a key as stored
            (``github.com/o/r``; a remote URL is normalised); ``None``/``""`` for none.

    Returns:
        The key, or ``None``.
    """
    return key_of(repo)


def _k(k: object, default: int) -> int:
    try:
        value = int(k)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default
    return min(max(value, 1), MAX_K)


def _scope(scope: ServerScope | None) -> ServerScope:
    """The caller's scope, or this process's directory's (the server's default)."""
    if scope is not None:
        return scope
    from .mcp_scope import ServerScope  # noqa: F811 - the runtime import of the type

    return ServerScope.here()


def _readable(note_scope: str, note_repo: str, wanted: str | None, every: bool) -> bool:
    """Whether a learning is inside a read: global, the wanted repository's, or any (``*``)."""
    return every or note_scope != "repo" or (wanted is not None and note_repo == wanted)


def load_note(kb_path: Path, note_id: str) -> tuple[Note, str]:
    """A learning's note by id, read safely: a regular file in ``documents/``, no link.

    Args:
        kb_path: The KB root.
        note_id: The id.

    Returns:
        The parsed note and its text.

    Raises:
        ToolError: Malformed id; no such note; the note is a symbolic link, not a regular
            file, too large, or does not parse — one line that never holds its content.
    """
    from reflect_jobs.fsio import NotRegularFile, TooLarge, UnsafePath, read_inside
    from reflect_jobs.kb.parse import MAX_NOTE_BYTES, NoteError, parse_note

    note_id = str(note_id or "").strip()
    if not _ID.match(note_id):
        raise ToolError(f"not a learning id: {note_id[:80]!r}")
    name = f"{note_id}.md"
    documents = Path(kb_path) / "documents"
    if not (documents / name).exists() and not (documents / name).is_symlink():
        conn = store.open_for_read(store.store_path(kb_path))
        row = None
        if conn is not None:
            try:
                row = store.get_row(conn, note_id)
            finally:
                conn.close()
        candidate = Path(row["path"]) if row and row.get("path") else None
        if candidate is None or candidate.parent != documents:
            raise ToolError(f"no learning {note_id}")
        name = candidate.name  # a hand-written note named differently from its id
    try:
        data = read_inside(kb_path, "documents", name, max_bytes=MAX_NOTE_BYTES)
    except UnsafePath as exc:
        if not str(exc.filename or "").endswith(name):  # documents/ itself is the link
            raise ToolError(f"refused: {exc}; nothing was read") from None
        raise ToolError(
            f"refused: {note_id} is a symbolic link (notes are read only as files inside"
            " documents/, never through a link); nothing of it was read"
        ) from None
    except TooLarge:
        raise ToolError(f"refused: {note_id} is larger than {MAX_NOTE_BYTES:,} bytes") from None
    except NotRegularFile:
        raise ToolError(f"refused: {note_id} is not a regular file") from None
    except FileNotFoundError:
        raise ToolError(f"no learning {note_id}") from None
    except OSError as exc:
        raise ToolError(f"{note_id} cannot be read: {exc.strerror or type(exc).__name__}") from None
    text = data.decode("utf-8", errors="replace")
    try:
        note = parse_note(text)
    except NoteError:
        raise ToolError(f"{note_id} does not parse as a note (see `reflect-jobs doctor`)") from None
    note.path = documents / name
    return note, text


def _note_scope(fm: dict[str, Any]) -> tuple[str, str]:
    """``(scope, repo key)`` a note's frontmatter says; a note without a scope is global."""
    scope = "repo" if str(fm.get("scope") or "global") == "repo" else "global"
    return scope, str(fm.get("repo") or "") if scope == "repo" else ""


def _snippet(note: Note, query: str, rule: str) -> str:
    """A short excerpt of the note around the query's first word found outside the title
    and rule (else its key insight or body start), one line, inert."""
    fm = note.frontmatter
    parts = [str(fm.get(k) or "") for k in ("key_insight", "problem", "root_cause", "fix")]
    text = " ".join(p for p in [*parts, note.body] if p and p.strip() != rule.strip())
    text = " ".join(text.split())
    if not text:
        return ""
    lower = text.lower()
    at = min(
        (i for i in (lower.find(w.lower()) for w in _WORD.findall(query)) if i >= 0), default=-1
    )
    start = max(at - HIT_SNIPPET_CHARS // 3, 0) if at >= 0 else 0
    piece = text[start : start + HIT_SNIPPET_CHARS]
    return block.inert(("…" if start else "") + piece, HIT_SNIPPET_CHARS + 2)


def search_tool(
    kb_path: Path,
    query: str,
    *,
    k: int = 5,
    mode: str = "hybrid",
    repo: str | None = None,
    vectors: bool = True,
    embed_model: str | None = None,
    scope: ServerScope | None = None,
) -> str:
    """The ``search`` tool: hits as JSON lines, each enough to act on without ``get``.

    A hit is ``{"id", "title", "rule", "snippet", "scope", "repo", …}`` followed by what the
    search gave (``score``, ``path``, ``status`` — ``"proposed"`` on a learning no one
    vouched for yet, ARCHITECTURE §7.1; ``"dormant": true`` on one nobody confirmed for
    ``REFLECT_FORGET_UNUSED_DAYS``, §13.3): the rule is what to do, the snippet the note's text
    around the query. Only learnings inside the server's reads are returned.

    Args:
        kb_path: The KB root.
        query: Free text.
        k: At most this many hits (1–20).
        mode: As ``reflect-jobs search --mode`` (:data:`MODES`).
        repo: Omitted for the server's repository; another one (a directory or key) or
            ``*`` only with ``REFLECT_MCP_ALL_REPOS=1``. Global learnings are always in.
        vectors: ``Settings.index_vectors``.
        embed_model: ``Settings.embed_model``.
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped result.

    Raises:
        ToolError: Empty query, unknown mode, or a repository outside the reads.
    """
    from reflect_jobs.index.search import search

    if not str(query or "").strip():
        raise ToolError("query is empty: give an error message, a file name or a topic")
    if mode not in MODES:
        raise ToolError(f"unknown mode {str(mode)[:40]!r}; expected one of {', '.join(MODES)}")
    bounds = _scope(scope)
    wanted = bounds.read_key(repo)
    every = wanted is None and bool(str(repo or "").strip()) and bounds.all_repos
    limit = _k(k, 5)
    result = search(
        kb_path,
        str(query)[:2000],
        mode=mode,
        k=limit,
        vectors=vectors,
        embed_model=embed_model,
        repo_key=None if every else wanted,
        only_global=wanted is None and not every,
        prefer_repo_key=bounds.key if every else None,  # every repository, its own first
    )
    lines: list[str] = []
    room = MAX_RESULT_CHARS - 400  # markers, warnings
    # Found, but not told at session start: nobody confirmed it lately (recall/fading.py).
    dormant = fading.dormant_ids(str(kb_path), [str(h.get("id")) for h in result.hits])
    for hit in result.hits:
        if hit.get("id") in dormant:
            hit = {**hit, "dormant": True}
        shown = _hit(kb_path, hit, str(query), wanted, every)
        if shown is None:
            continue
        line = json.dumps(shown, ensure_ascii=False)
        if len(line) + 1 > room:
            lines.append("… more hits did not fit: ask with a smaller k")
            break
        lines.append(line)
        room -= len(line) + 1
    if wanted is not None and wanted == bounds.key and not every:
        # One search over everything remembered here: the store's items and the
        # harnesses' memory files (docs/REFLECTIONS.md, "One search").
        for extra in _remembered(str(query)[:2000], bounds, limit):
            line = json.dumps(extra, ensure_ascii=False)
            if len(line) + 1 > room:
                break
            lines.append(line)
            room -= len(line) + 1
    lines = lines or [f"no matches: {result.reason}" if result.reason else "no matches"]
    lines += [f"warning: {block.inert(w, 300)}" for w in result.warnings]
    return wrap("\n".join(lines))


def _remembered(query: str, bounds: ServerScope, k: int) -> list[dict[str, Any]]:
    """The server's repository's items and memory files matching ``query`` (inert text).

    Returns:
        Up to ``k`` item hits ``{"item", "kind", "status", "title"}`` then up to ``k``
        memory hits ``{"memory": <file>, "harness", "title", "snippet"}``; nothing when the
        store cannot be read (the learnings still answer).
    """
    import sqlite3

    from reflect_jobs.reflections.fold import now_utc
    from reflect_jobs.reflections.store import open_store
    from reflect_jobs.repo import RepoError

    try:
        store = open_store(None, bounds.cwd)  # the server's own repository
    except (RepoError, OSError, sqlite3.Error):
        return []
    try:
        now = now_utc()
        items = store.search(query, k)
        files = store.memory_search(query, k)
    except (OSError, sqlite3.Error):
        return []
    finally:
        store.close()
    out: list[dict[str, Any]] = [
        {
            "item": item.id,
            "kind": item.kind,
            "status": item.to_json(now)["status"],
            "title": block.inert(item.title, 200),
        }
        for item, _score in items
        if item.kind != "summary"
    ]
    out += [
        {
            "memory": block.inert(hit["file"], 400),
            "harness": hit["harness"],
            "title": block.inert(hit["title"], 200),
            "snippet": block.inert(hit["snippet"], 300),
        }
        for hit in files
    ]
    return out


def _hit(
    kb_path: Path, hit: dict[str, Any], query: str, wanted: str | None, every: bool
) -> dict[str, Any] | None:
    """One search hit as the agent gets it; ``None`` when unreadable or outside the reads."""
    try:
        note, _ = load_note(kb_path, str(hit.get("id") or ""))
    except ToolError:
        return None  # gone, a link, or garbled since the index saw it: nothing to show
    fm = note.frontmatter
    kind, key = _note_scope(fm)
    if not _readable(kind, key, wanted, every):
        return None
    rule = block.inert(fm.get("rule") or fm.get("key_insight"), HIT_RULE_CHARS)
    out: dict[str, Any] = {
        "id": note.id,
        "title": block.inert(fm.get("title"), 200),
        "rule": rule,
        "snippet": _snippet(note, query, rule),
        "scope": kind,
        "repo": key or None,
    }
    for name, value in hit.items():
        if name not in out:
            out[name] = value
    status = str(fm.get("status") or "active")
    if status != "active":
        out["status"] = status
    return out


def get_tool(kb_path: Path, note_id: str, *, scope: ServerScope | None = None) -> str:
    """The ``get`` tool: one note's full text by id.

    Args:
        kb_path: The KB root.
        note_id: A learning id (``lrn-…``) as the context block or search named it.
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped note (path first), cut to the bound.

    Raises:
        ToolError: The id is malformed, no such note exists, it cannot be read safely
            (:func:`load_note`), or it is another repository's learning.

    The fetch is a confirmation of the learning (``ledger/confirmations.py``), handed to
    the worker through the queue (:func:`reflect_jobs.recall.fading.hand_over`).
    """
    bounds = _scope(scope)
    note, text = load_note(kb_path, note_id)
    kind, key = _note_scope(note.frontmatter)
    if not _readable(kind, key, bounds.key, bounds.all_repos):
        raise ToolError(
            f"refused: {note.id} is a learning of repository {key[:200]}, not this server's"
            f" ({bounds.key or 'none'}); REFLECT_MCP_ALL_REPOS=1 lets it read others"
        )
    # An agent fetched it whole: a confirmation (recorded by the worker; it wakes a dormant one).
    fading.hand_over([[note.id, "get", None]])
    return wrap(f"id: {note.id}\npath: {note.path}\n\n{text}")


def recent_tool(
    kb_path: Path, *, repo: str | None = None, k: int = 10, scope: ServerScope | None = None
) -> str:
    """The ``recent`` tool: the newest learnings of a repository and the global ones.

    Args:
        kb_path: The KB root.
        repo: Omitted for the server's repository; another (or ``*``) only with
            ``REFLECT_MCP_ALL_REPOS=1``.
        k: At most this many (1–20).
        scope: The server's boundary (default: this process's directory's).

    Returns:
        The wrapped result, one learning per line with id, scope and path.
    """
    bounds = _scope(scope)
    wanted = bounds.read_key(repo)
    every = wanted is None and bool(str(repo or "").strip())
    conn = store.open_for_read(store.store_path(kb_path))
    if conn is None:
        return wrap("no learnings yet (the context store is built by `reflect-jobs reindex`)")
    try:
        if every:
            rows = store.recent_rows(conn, None, limit=_k(k, 10))
        else:
            rows = store.recent_rows(conn, wanted, limit=_k(k, 10), with_global=True)
    finally:
        conn.close()
    lines = [
        f"{block.item_line(r)}  [{'repo ' + block.inert(r.get('repo_key'), 200) if r.get('scope') == 'repo' else 'global'}]"
        f"  ({block.inert(r.get('path'), 300)})"
        for r in rows
    ]
    return wrap("\n".join(lines) or "no learnings for this repository yet")


#: Learnings and items ``context`` with a query tells at most.
CONTEXT_QUERY_MAX = 8


def context_tool(
    kb_path: Path,
    cwd: str | None = None,
    *,
    max_chars: int = block.DEFAULT_MAX_CHARS,
    scope: ServerScope | None = None,
    query: str | None = None,
) -> str:
    """The ``context`` tool: what a new session in ``cwd`` is told, or what a task needs.

    Args:
        kb_path: The KB root.
        cwd: The working directory (omitted: the server's); another repository's only
            with ``REFLECT_MCP_ALL_REPOS=1``.
        max_chars: The block's budget (200–12,000).
        scope: The server's boundary (default: this process's directory's).
        query: The task (bounded like a prompt): rank the repository's learnings, the
            fitting globals and the open items against it (``recall/relevance.py``), at
            most :data:`CONTEXT_QUERY_MAX`, only above the relevance floor.

    Returns:
        The block, or a wrapped "nothing to tell".

    Raises:
        ToolError: ``cwd`` is in another repository and the setting is off.
    """
    from .prompt_hook import prompt_recall
    from .session_start import session_context

    where = _scope(scope).read_dir(cwd)
    try:
        budget = int(max_chars)
    except (TypeError, ValueError):
        budget = block.DEFAULT_MAX_CHARS
    budget = min(max(budget, 200), MAX_RESULT_CHARS)
    if query is not None and str(query).strip():
        text, _ = prompt_recall(
            where,
            str(query),
            max_chars=budget,
            kb_root=str(kb_path),
            limit=CONTEXT_QUERY_MAX,
            relative=0.4,
            heading="Learnings and open items for this task (reflect-jobs)",
        )
        return text or wrap("nothing stored is relevant to this task (below the relevance floor)")
    text = session_context(where, max_chars=budget, kb_root=str(kb_path))
    return text or wrap("no learnings for this directory yet")
