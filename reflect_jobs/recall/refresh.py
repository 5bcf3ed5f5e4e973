"""Keep the context store in step with the notes (worker side; ARCHITECTURE §13).

Fed by :func:`reflect_jobs.index.maintenance.reindex` with what that pass parsed, batch by
batch (:class:`ContextSync`): the active notes whose bytes changed and the ids that were
retired or deleted. Every add,
retirement and note edit ends in a (coalesced) reindex, so the store trails the notes by one
reindex, as the lexical index does. A store that has never been filled (new, deleted, or
from before this feature) is filled from every note once; ``reindex --force`` refills it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reflect_jobs import kb
from reflect_jobs.kb.render import anchors_value, applies_when
from reflect_jobs.lifecycle import is_told

from . import fading, stack, store


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
        ``global`` (every note written before scopes existed) — but a pending global
        (``proposed_scope: global``) is never ``global``; ``proof_count`` from the
        frontmatter (else its ``sources``, else 1); ``anchors`` the note's anchors as
        compact JSON (``""`` for none), which the SessionStart hook checks against the
        working tree before telling it (``recall/verify.py``); ``applies_to`` the note's
        own, else the stack its tags, entities and wording name (``recall/stack.py``);
        ``confirmations`` the note's count and ``awake_ts`` where its dormancy clock starts
        (``recall/fading.py``: the later of ``created`` and ``last_confirmed``; a note that
        never recorded a confirmation but has proof from 2+ sources — written before
        confirmations were recorded — counts its last ``updated`` as one); ``applies_when``
        the tasks it matters in, a phrase a line.
    """
    fm = note.frontmatter
    repo = fm.get("repo")
    scoped = str(fm.get("scope") or "").strip().lower() == "repo"
    is_repo = scoped and isinstance(repo, str) and bool(repo.strip())
    # A pending global (issue 24: ``proposed_scope: global``, pipeline/global_cap.py) is told
    # only in its repository; one that names none is told nowhere rather than everywhere.
    pending = str(fm.get(kb.PROPOSED_SCOPE) or "").strip().lower() == "global"
    sources = fm.get("sources")
    proof = fm.get("proof_count")
    if not isinstance(proof, int) or isinstance(proof, bool) or proof < 1:
        proof = max(len(sources), 1) if isinstance(sources, list) else 1
    return {
        "id": note.id,
        "scope": "repo" if is_repo or pending else "global",
        "repo_key": repo.strip() if is_repo and isinstance(repo, str) else "",
        "title": str(fm.get("title") or ""),
        "rule": str(fm.get("rule") or ""),
        "key_insight": str(fm.get("key_insight") or ""),
        "category": str(fm.get("category") or ""),
        "path": str(note.path or ""),
        "proof_count": int(proof),
        "confidence": min(max(_num(fm.get("confidence_num"), 0.6), 0.0), 1.0),
        "updated_ts": _ts(fm.get("updated") or fm.get("created") or ""),
        "applies_to": stack.dumps(
            stack.applies_of(
                fm.get("applies_to"),
                fm.get("tags"),
                fm.get("entities"),
                " ".join(str(fm.get(k) or "") for k in ("title", "rule", "key_insight")),
            )
        ),
        "content_hash": digest,
        "anchors": _anchors_json(fm.get("anchors")),
        "confirmations": _count(fm.get("confirmations")),
        "awake_ts": awake_of(fm),
        "applies_when": "\n".join(applies_when(fm)),
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def awake_of(fm: dict) -> float:
    """Where a note's dormancy clock starts (``recall/fading.py:awake_ts``).

    Args:
        fm: The note's frontmatter.

    Returns:
        The later of ``created`` and ``last_confirmed`` (Unix time; a note that never
        recorded a confirmation but has proof from 2+ sources — written before
        confirmations were recorded — counts its last ``updated``); 0 when unknown.
    """
    last = _ts(fm.get("last_confirmed") or "")
    proof = fm.get("proof_count")
    sources = fm.get("sources")
    many = (isinstance(proof, int) and proof >= 2) or (
        isinstance(sources, list) and len(sources) >= 2
    )
    if "confirmations" not in fm and many:
        last = max(last, _ts(fm.get("updated") or ""))  # before confirmations were recorded
    return fading.awake_ts(_ts(fm.get("created") or ""), last)


def _anchors_json(value: object) -> str:
    """A note's anchors as the store keeps them: compact JSON, ``""`` for none."""
    anchors = anchors_value(value)
    return json.dumps(anchors, separators=(",", ":"), ensure_ascii=False) if anchors else ""


#: Rows written to the context store per transaction.
BATCH = 500


class ContextSync:
    """One reindex pass's changes to the context store, written in batches as they come.

    A reindex streams its notes (memory independent of the KB's size), so the store is fed
    batch by batch rather than with one list of every note. A store that was never filled
    (or is rebuilt, ``force``) is filled from every active note at :meth:`finish`, also in
    batches. A failure here never fails the reindex: the first error is kept in ``error``
    and the rest of the pass skips the store (search goes on from the lexical index).

    Args:
        kb_path: The KB root (the store is ``index/context.db`` under it).
        force: Empty the store first (``reindex --force``).
        complete: The pass hands every active note to :meth:`add` (a forced or first
            reindex), so an empty store is filled from those rather than read again.
    """

    def __init__(self, kb_path: Path, *, force: bool, complete: bool = False) -> None:
        """Open the store (emptied when ``force``); an error is kept, not raised."""
        self.kb_path = kb_path
        self.error: str = ""
        self.written = 0
        self.fill_all = False
        self._conn: Any = None
        try:
            self._conn = store.open_for_write(store.store_path(kb_path))
            if force:
                store.clear(self._conn)
            self.fill_all = not complete and not store.is_populated(self._conn)
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.error = self.error or f"context store: {type(exc).__name__}: {exc}"
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None

    def add(self, pairs: Iterable[tuple[kb.Note, str]]) -> None:
        """Write the rows of active notes whose bytes changed.

        Args:
            pairs: ``(note, digest)``; ignored when :meth:`finish` refills everything.
        """
        if self._conn is None or self.fill_all:
            return
        # Only what may be told: a proposed learning waits for review (ARCHITECTURE §7.1)
        # and is never in the store, so neither the session-start block, per-prompt recall
        # nor the MCP ``recent``/``context`` tools can tell it (a note turned proposed again
        # leaves it).
        told, held = [], []
        for note, digest in pairs:
            if is_told(note.frontmatter.get("status")):
                told.append(row_from_note(note, digest))
            else:
                held.append(str(note.id))
        try:
            store.delete_many(self._conn, held)
            self.written += store.upsert_many(self._conn, told)
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)

    def remove(self, ids: Iterable[str]) -> None:
        """Forget ids retired, superseded or deleted in this pass.

        Args:
            ids: Note ids.
        """
        if self._conn is None:
            return
        try:
            store.delete_many(self._conn, [str(i) for i in ids])
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)

    def finish(self, all_active: Callable[[Path], Iterable[tuple[kb.Note, str]]]) -> int:
        """Fill a store that was never filled from every active note, mark it, close it.

        Args:
            all_active: Yields every active ``(note, digest)`` (streamed, not a list).

        Returns:
            How many rows this pass wrote.
        """
        if self._conn is None:
            return self.written
        try:
            if self.fill_all:
                batch: list[dict] = []
                for note, digest in all_active(self.kb_path):
                    if not is_told(note.frontmatter.get("status")):
                        continue  # waiting for review: never told
                    batch.append(row_from_note(note, digest))
                    if len(batch) >= BATCH:
                        self.written += store.upsert_many(self._conn, batch)
                        batch = []
                self.written += store.upsert_many(self._conn, batch)
            store.mark_populated(self._conn)
            self._conn.close()
            self._conn = None
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)
        return self.written


def sync(
    kb_path: Path,
    *,
    changed: Iterable[tuple[kb.Note, str]],
    removed: Iterable[str],
    force: bool,
    all_active: Callable[[Path], Iterable[tuple[kb.Note, str]]],
) -> int:
    """Apply one reindex pass to the context store (:class:`ContextSync` in one call).

    Args:
        kb_path: The KB root (the store is ``index/context.db`` under it).
        changed: ``(note, digest)`` of active (and proposed) notes whose bytes changed;
            proposed ones are removed from the store rather than written.
        removed: Ids retired, superseded or deleted in this pass.
        force: Empty the store first (``reindex --force``).
        all_active: Yields every active note; used when the store was never filled.

    Returns:
        How many rows were written.

    Raises:
        sqlite3.Error: The store cannot be written (the reindex reports it, search goes on).
        OSError: Its directory cannot be created.
    """
    run = ContextSync(kb_path, force=force)
    run.remove(removed)
    run.add(changed)
    written = run.finish(all_active)
    if run.error:
        raise sqlite3.Error(run.error)
    return written
