"""The reflector: the write stage's one paid call keeps the Reflection Store true too.

Two halves, both run by the pipeline around that call (docs/REFLECTIONS.md, "The reflector"):

* :func:`offer` (prepare stage, $0) opens the job's repository's store, chooses the items to
  show (:mod:`.candidates`) and returns the block appended to the slice and the offered uids
  the job keeps.
* :func:`apply` (add stage) appends the answer's changes with ``by="reflector"`` and the
  job's session id: updates only for offered ids (others are ignored and counted), new
  items only when the store does not already hold them (the same title, or a near twin),
  and the summary as the session's one ``summary`` item. Every event id is derived from the
  job id and the change's place in the answer, and an id already in a log is not written
  again, so a retried add stage appends nothing twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from reflect_jobs.repo import RepoError

from .candidates import Offer, render_block, select_candidates, session_summary
from .events import EventError, redact_text
from .fold import Item, now_utc, starting_status
from .store import Store, StoreError, open_store

#: New items whose title shares this share of words with a live item's are that item.
TWIN_JACCARD = 0.8
_WORD = re.compile(r"\w+")
_OPS = {"done": "done", "dropped": "drop", "open": "reopen"}
_BASE = {"done": "done", "dropped": "dropped"}
#: What one item change can be refused with (a bad field, an item the store will not take,
#: a date it cannot handle): that change is skipped and counted as ``rejected``; only a log
#: that cannot be written (``OSError``) fails the add stage, which retries it.
REFUSED = (EventError, StoreError, ValueError, OverflowError)

__all__ = [
    "TWIN_JACCARD",
    "Applied",
    "apply",
    "det_hex",
    "find_duplicate",
    "job_store",
    "offer",
    "title_tokens",
]


@dataclass
class Applied:
    """What :func:`apply` did, for the job's done event detail."""

    updated: int = 0
    ignored: int = 0
    unchanged: int = 0
    added: int = 0
    duplicates: int = 0
    summary: str = "none"
    rejected: int = 0

    def detail(self) -> str:
        """One line for the job's history, e.g. ``items: updated=1 ignored=1 …``.

        Returns:
            The counts as ``key=value`` pairs.
        """
        return (
            f"items: updated={self.updated} ignored={self.ignored} unchanged={self.unchanged}"
            f" added={self.added} duplicates={self.duplicates} summary={self.summary}"
            + (f" rejected={self.rejected}" if self.rejected else "")
        )


def det_hex(job_id: str, *parts: object) -> str:
    """A 16-hex id fixed by the job and the change's place: the same on every retry.

    Args:
        job_id: The job.
        *parts: What the id is for (e.g. ``"update", 0``).

    Returns:
        16 lowercase hex digits.
    """
    raw = "\x1f".join(["reflector", job_id, *map(str, parts)])
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:16]


def title_tokens(title: str) -> frozenset[str]:
    """The set of lowercase words of a title (as stored: redacted, spaces collapsed).

    Args:
        title: Any title.

    Returns:
        Its word tokens.
    """
    return frozenset(_WORD.findall(redact_text(title).lower()))


def _norm(title: str) -> str:
    return " ".join(redact_text(title).lower().split())


def find_duplicate(title: str, items: list[Item]) -> Item | None:
    """The item the store already holds for a new item's ``title``, if any (pure).

    Args:
        title: The new item's title.
        items: The repository's items (summaries are never matched).

    Returns:
        An item of any status with the same normalised title, else a live (open or note)
        item whose title's word set has Jaccard similarity ≥ :data:`TWIN_JACCARD`; ``None``.
    """
    norm, words = _norm(title), title_tokens(title)
    pool = [i for i in items if i.kind != "summary"]
    for item in pool:
        if _norm(item.title) == norm:
            return item
    if not words:
        return None
    for item in pool:
        if item.base not in ("open", "note"):
            continue
        other = title_tokens(item.title)
        if other and len(words & other) / len(words | other) >= TWIN_JACCARD:
            return item
    return None


def job_store(repo: Any, environ: dict[str, str] | None = None) -> Store | None:
    """The store of a job's repository (``prepare_stats["repo"]``), when it has one.

    Args:
        repo: ``{"key", "root", "cwd"}`` as prepare recorded it, or ``None``.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The open store, or ``None`` when the transcript's repository is unknown or gone.

    Raises:
        RepoError: The memory-home mapping is bad.
    """
    root = repo.get("root") if isinstance(repo, dict) else None
    if not isinstance(root, str) or not os.path.isdir(root):
        return None
    return open_store(root, Path(root), environ)


def offer(store: Store, session: str | None, excerpt: str, now: datetime | None = None) -> Offer:
    """The items a job offers, its previous summary, and the block for the slice.

    Args:
        store: The repository's store.
        session: The job's session id.
        excerpt: Free text the store is searched with (the slice's start).
        now: The reading time.

    Returns:
        The :class:`Offer`; its block is there even when no item is listed, so the call
        may add the first items and the session's first summary.
    """
    when = now or now_utc()
    everything = store.items("all", now=when)
    matches = [i for i, _ in store.search(excerpt, k=20)] if excerpt.strip() else []
    chosen = select_candidates(everything, matches, session=session, now=when)
    summary = session_summary(everything, session)
    block, shown = render_block(chosen, summary, when)
    return Offer(items=shown, summary=summary, block=block)


def _resolve(ident: str, offered: list[str]) -> str | None:
    """The one offered uid an answer's id names (an id is a prefix of its uid)."""
    prefix = ident.lstrip("#").lower()
    hits = [u for u in offered if u.startswith(prefix)]
    return hits[0] if len(hits) == 1 else None


def apply(
    store: Store,
    plan: dict[str, Any],
    *,
    offered: list[str],
    session: str | None,
    job_id: str,
    now: datetime | None = None,
) -> Applied:
    """Append the reflector's changes to the store (idempotent per job).

    Args:
        store: The job's repository's store.
        plan: ``{"update", "new", "summary"}`` as ``writer/items.py`` bounded it.
        offered: The uids the job's prompt offered (``prepare_stats["items_offered"]``).
        session: The job's session id (new items and the summary carry it).
        job_id: The job (event ids are derived from it).
        now: The event time.

    Returns:
        The counts.

    Raises:
        OSError: The log could not be written (the caller retries the add stage). Any
            other refusal of one change is skipped and counted (``rejected``): the job was
            paid for, and one bad change must not cost it the rest.
    """
    done = Applied()
    store.refresh()
    by_uid = {i.uid: i for i in store.items("all", now=now)}
    for n, upd in enumerate(plan.get("update") or []):
        uid = _resolve(str(upd.get("id", "")), offered)
        item = by_uid.get(uid) if uid else None
        if item is None:
            done.ignored += 1
            continue
        status = upd.get("status")
        fields: dict[str, str | None] = {"note": upd.get("note")}
        if status in _BASE:
            if item.base == _BASE[status]:
                done.unchanged += 1
                continue
            op = _OPS[status]
        elif status == "open" and item.base not in ("open", "note"):
            op = "reopen"
        elif upd.get("title") or upd.get("body"):
            op = "edit"
            fields.update(title=upd.get("title"), body=upd.get("body"))
        else:
            done.unchanged += 1
            continue
        try:
            eid = det_hex(job_id, "update", n)
            store.record(op, item.uid, eid=eid, by="reflector", now=now, **fields)
        except REFUSED:
            done.rejected += 1  # one refused update never costs the paid job its answer
            continue
        done.updated += 1
        item.base = starting_status(item.kind) if op == "reopen" else _BASE.get(status, item.base)
    held = list(by_uid.values())
    for n, new in enumerate(plan.get("new") or []):
        uid, eid = det_hex(job_id, "new", n), det_hex(job_id, "new-event", n)
        if uid in by_uid:  # written by an earlier run of this job
            done.added += 1
            continue
        if find_duplicate(str(new.get("title", "")), held) is not None:
            done.duplicates += 1
            continue
        try:
            store.record(
                "add",
                uid,
                eid=eid,
                by="reflector",
                now=now,
                kind=new.get("kind"),
                title=new.get("title"),
                body=new.get("body") or None,
                session=session,
                note=new.get("note") or None,
            )
        except REFUSED:
            done.rejected += 1
            continue
        done.added += 1
        held.append(Item(uid, str(new["kind"]), str(new["title"]), "", "open", "reflector", "", ""))
    text = plan.get("summary")
    if text and session:
        try:
            done.summary = _summary(store, held, text, session=session, job_id=job_id, now=now)
        except REFUSED:
            done.rejected += 1
    store.refresh()
    return done


def _summary(
    store: Store, held: list[Item], text: str, *, session: str, job_id: str, now: datetime | None
) -> str:
    """Write the session's summary: edit its one item, or add it; says which."""
    prev = session_summary(held, session)
    eid = det_hex(job_id, "summary")
    if prev is None:
        wrote = store.record(
            "add",
            det_hex("summary", session),
            eid=eid,
            by="reflector",
            now=now,
            kind="summary",
            title=f"Summary of session {session}"[:200],
            body=text,
            session=session,
        )
        return "added" if wrote else "kept"
    if prev.body == redact_text(text):
        return "kept"
    wrote = store.record("edit", prev.uid, eid=eid, by="reflector", now=now, body=text)
    return "replaced" if wrote else "kept"


def offer_for_job(
    repo: Any, session: str | None, slice_text: str, environ: dict[str, str] | None = None
) -> tuple[Offer, str | None]:
    """:func:`offer` for a job's repository; a store that cannot be read offers nothing.

    Args:
        repo: ``prepare_stats["repo"]``.
        session: The job's session id.
        slice_text: The prepared slice (its start is the search excerpt).
        environ: The environment.

    Returns:
        The offer and, when the store could not be read, why (for the log).
    """
    from .candidates import excerpt_query

    try:
        store = job_store(repo, environ)
        if store is None:
            return Offer(), None
        try:
            return offer(store, session, excerpt_query(slice_text)), None
        finally:
            store.close()
    except (RepoError, OSError, ValueError, sqlite3.Error) as exc:
        return Offer(), f"{type(exc).__name__}: {exc}"
