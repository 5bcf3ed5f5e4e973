"""Keep the context store in step with the notes (worker side; ARCHITECTURE §13).

Called by :func:`reflect_jobs.index.maintenance.reindex` with what that pass already parsed:
the active notes whose bytes changed and the ids that were retired or deleted. Every add,
retirement and note edit ends in a (coalesced) reindex, so the store trails the notes by one
reindex, as the lexical index does. A store that has never been filled (new, deleted, or
from before this feature) is filled from every note once; ``reindex --force`` refills it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from reflect_jobs import kb
from reflect_jobs.lifecycle import is_told

from . import store


def _ts(value: object) -> float:
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            return 0.0
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _num(value: object, default: float) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def row_from_note(note: kb.Note, digest: str) -> dict:
    """The context-store row of one active note.

    Args:
        note: A parsed note (its ``path`` set).
        digest: The sha256 of its bytes.

    Returns:
        A row for :func:`reflect_jobs.recall.store.upsert_many`: ``scope`` is ``repo`` only
        for a note whose frontmatter says ``scope: repo`` and names a ``repo``, else
        ``global`` (every note written before scopes existed); ``proof_count`` from the
        frontmatter (else its ``sources``, else 1).
    """
    fm = note.frontmatter
    repo = fm.get("repo")
    scoped = str(fm.get("scope") or "").strip().lower() == "repo"
    is_repo = scoped and isinstance(repo, str) and bool(repo.strip())
    sources = fm.get("sources")
    proof = fm.get("proof_count")
    if not isinstance(proof, int) or isinstance(proof, bool) or proof < 1:
        proof = max(len(sources), 1) if isinstance(sources, list) else 1
    return {
        "id": note.id,
        "scope": "repo" if is_repo else "global",
        "repo_key": repo.strip() if is_repo and isinstance(repo, str) else "",
        "title": str(fm.get("title") or ""),
        "rule": str(fm.get("rule") or ""),
        "key_insight": str(fm.get("key_insight") or ""),
        "category": str(fm.get("category") or ""),
        "path": str(note.path or ""),
        "proof_count": int(proof),
        "confidence": min(max(_num(fm.get("confidence_num"), 0.6), 0.0), 1.0),
        "updated_ts": _ts(fm.get("updated") or fm.get("created") or ""),
        "content_hash": digest,
    }


def sync(
    kb_path: Path,
    *,
    changed: Iterable[tuple[kb.Note, str]],
    removed: Iterable[str],
    force: bool,
    all_active: Callable[[Path], list[tuple[kb.Note, str]]],
) -> int:
    """Apply one reindex pass to the context store.

    Args:
        kb_path: The KB root (the store is ``index/context.db`` under it).
        changed: ``(note, digest)`` of active (and proposed) notes whose bytes changed;
            proposed ones are removed from the store rather than written.
        removed: Ids retired, superseded or deleted in this pass.
        force: Empty the store first (``reindex --force``).
        all_active: Lists every active note; used when the store was never filled.

    Returns:
        How many rows were written.

    Raises:
        sqlite3.Error: The store cannot be written (the reindex reports it, search goes on).
        OSError: Its directory cannot be created.
    """
    conn = store.open_for_write(store.store_path(kb_path))
    try:
        if force:
            store.clear(conn)
        pairs = list(changed)
        if not store.is_populated(conn):
            pairs = all_active(kb_path)
        # Only what may be told: a proposed learning waits for review (ARCHITECTURE §7.1)
        # and is never in the store, so neither the session-start block, per-prompt recall
        # nor the MCP ``recent``/``context`` tools can tell it.
        held = [n.id for n, _ in pairs if not is_told(n.frontmatter.get("status"))]
        pairs = [(n, d) for n, d in pairs if is_told(n.frontmatter.get("status"))]
        store.delete_many(conn, [str(i) for i in [*removed, *held]])
        written = store.upsert_many(conn, [row_from_note(n, d) for n, d in pairs])
        store.mark_populated(conn)
        return written
    finally:
        conn.close()
