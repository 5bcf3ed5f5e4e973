"""What the dashboard shows, gathered from the modules that own it — no second copy of rules.

Counts and warnings are :func:`reflect_jobs.status.collect_status` (the ``status --json``
document), spend is :func:`reflect_jobs.ledger.admin.cost_report`, jobs come through
:func:`reflect_jobs.ledger.admin.job_dict`, notes through :mod:`reflect_jobs.kb`, search is
:func:`reflect_jobs.index.search.search`. Everything returns plain JSON-able data; nothing
here imports the web stack, so the tests call it on a SQLite file directly.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from ..config import Settings
from ..ledger import admin
from ..ledger.db import session_scope
from ..ledger.models import Job, JobEvent, utcnow
from ..lifecycle import JOB_STATES, NEEDS_PERSON_STATES
from .chart import DAYS, daily_series

#: The states whose jobs the page lists with a retry button, in ``status`` order.
STUCK_STATES = tuple(s for s in JOB_STATES if s in NEEDS_PERSON_STATES)
#: A note's text is cut to this many characters on the page (the file keeps all of it).
NOTE_TEXT_MAX = 1200
#: Search modes the page accepts; lexical is the default (no model load on a keystroke).
SEARCH_MODES = ("lexical", "hybrid")
#: Characters of a rule, evidence or item body shown (the file keeps all of it).
TEXT_MAX = 600
#: path → (mtime_ns, size, the note's entry or ``None`` when it did not parse).
_NOTE_CACHE: dict[str, tuple[int, int, dict[str, Any] | None]] = {}


def cut(text: object, limit: int = TEXT_MAX) -> str:
    """Text as the page shows it: at most ``limit`` characters, an ellipsis when cut.

    Args:
        text: Any value (``None`` is empty).
        limit: The most characters shown.

    Returns:
        The text, whole or cut.
    """
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def spend_series(db_url: str, *, days: int = DAYS) -> list[dict[str, Any]]:
    """Paid calls and spend per UTC day for the chart, the last ``days`` days.

    Args:
        db_url: The ledger.
        days: The window.

    Returns:
        :func:`reflect_jobs.dashboard.chart.daily_series` over the ledger's cost rows.
    """
    report = admin.cost_report(db_url, by="day", since=timedelta(days=days + 1))
    return daily_series(report["rows"], today=utcnow().date(), days=days)


def stuck_jobs(db_url: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Poisoned, quarantined and halted jobs, newest change first, each with its last event.

    Args:
        db_url: The ledger.
        limit: At most this many jobs.

    Returns:
        One :func:`~reflect_jobs.ledger.admin.job_dict` per job plus ``last_event``
        (``at``, ``from``, ``to``, ``outcome``, ``detail``; ``None`` when it has none).
    """
    with session_scope(db_url, readonly=True) as session:
        jobs = list(
            session.scalars(
                select(Job)
                .where(Job.state.in_(STUCK_STATES))
                .order_by(Job.updated_at.desc())
                .limit(limit)
            )
        )
        ids = [j.id for j in jobs]
        last_ids = (
            select(func.max(JobEvent.id)).where(JobEvent.job_id.in_(ids)).group_by(JobEvent.job_id)
        )
        events = {
            e.job_id: e for e in session.scalars(select(JobEvent).where(JobEvent.id.in_(last_ids)))
        }
        out = []
        for job in jobs:
            d = admin.job_dict(job)
            e = events.get(job.id)
            d["last_event"] = (
                None
                if e is None
                else {
                    "at": e.at.isoformat() if e.at else None,
                    "from": e.from_state,
                    "to": e.to_state,
                    "outcome": e.outcome,
                    "detail": e.detail,
                }
            )
            out.append(d)
        return out


def recent_notes(kb_path: Path, *, limit: int = 10) -> list[dict[str, Any]]:
    """The most recently written notes of the KB, with their text.

    Note files are written by a model from transcripts, so their text is hostile input:
    this returns it as plain strings, and the page escapes every one.

    Args:
        kb_path: The KB root.
        limit: At most this many notes.

    Returns:
        Newest first: ``id``, ``title``, ``category``, ``status``, ``key_insight``, ``text``
        (the body, cut to :data:`NOTE_TEXT_MAX` characters), ``truncated`` and
        ``modified_at`` (ISO 8601). Files that do not parse are skipped. A file whose
        mtime and size are unchanged since the last call is not parsed again (the page
        refreshes every few seconds; YAML parsing was most of its render time).
    """
    from datetime import UTC, datetime

    from ..kb import store
    from ..kb.parse import NoteError, parse_note

    stamped = []
    for path in store.iter_notes(kb_path):
        try:
            st = os.stat(path)
        except OSError:
            continue  # removed between the listing and the stat
        stamped.append((st.st_mtime_ns, st.st_size, path))
    stamped.sort(key=lambda m: (-m[0], m[2].name))
    notes: list[dict[str, Any]] = []
    keep: dict[str, tuple[int, int, dict[str, Any] | None]] = {}
    for mtime_ns, size, path in stamped:
        if len(notes) >= limit:
            break
        key = str(path)
        cached = _NOTE_CACHE.get(key)
        if cached is not None and cached[:2] == (mtime_ns, size):
            entry = cached[2]
        else:
            try:
                note = parse_note(path)
            except NoteError:
                entry = None
            else:
                fm = note.frontmatter
                entry = {
                    "id": str(note.id),
                    "title": str(fm.get("title", "")),
                    "category": str(fm.get("category", "")),
                    "status": str(fm.get("status", "active")),
                    "key_insight": str(fm.get("key_insight", "")),
                    "text": note.body[:NOTE_TEXT_MAX],
                    "truncated": len(note.body) > NOTE_TEXT_MAX,
                    "modified_at": datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(),
                }
        keep[key] = (mtime_ns, size, entry)
        if entry is not None:
            notes.append(dict(entry))
    _NOTE_CACHE.clear()  # only what this listing showed: the cache stays `limit`-sized
    _NOTE_CACHE.update(keep)
    return notes


def search_notes(settings: Settings, query: str, *, mode: str = "lexical") -> dict[str, Any]:
    """The search box: :func:`reflect_jobs.index.search.search` over the KB.

    Args:
        settings: The settings (the KB, whether vectors are on, the embedding model).
        query: What the person typed.
        mode: ``lexical`` (BM25 only; the default, so a keystroke never loads a model) or
            ``hybrid`` (lexical and vector ranks fused).

    Returns:
        ``hits`` (``id``, ``title``, ``score``, ``path``), ``warnings`` and ``error``
        (``None``, or one line when search cannot answer, e.g. a damaged index).

    Raises:
        ValueError: ``mode`` is not one of :data:`SEARCH_MODES`.
    """
    if mode not in SEARCH_MODES:
        raise ValueError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
    from ..index.search import SearchError, search

    if not query.strip():
        return {"hits": [], "warnings": [], "error": None}
    try:
        result = search(
            settings.kb_path,
            query,
            mode=mode,
            k=10,
            vectors=settings.index_vectors and mode != "lexical",
            embed_model=settings.embed_model,
        )
    except SearchError as exc:
        return {"hits": [], "warnings": [], "error": str(exc)}
    return {"hits": result.hits, "warnings": result.warnings, "error": None}


def open_items_by_repository(
    settings: Settings, *, shown: int = 5, bodies: bool = False
) -> dict[str, Any]:
    """The Reflection Store's open items per repository this machine knows (ARCHITECTURE §14).

    A repository is known when its logs sit in a default memory home
    (``$GLOBAL_LEARNINGS_PATH/repos/<name>/reflections``) or this machine's reflection index
    has read them before (a mapped home): :func:`reflect_jobs.reflections.known.known_repos`,
    shown by its key (``github.com/acme/shop``). Each is refreshed from its logs first
    (cheap when unchanged), so the page never shows an item another machine closed and
    synced.

    Args:
        settings: The settings (the KB root, ``$REFLECT_HOME`` for the index).
        shown: How many of each repository's open items to list (handoffs first, newest).
        bodies: Also give each item's ``body`` (cut to ``TEXT_MAX`` characters),
            ``created_at`` and ``by`` (the memory view's Done/Drop list).

    Returns:
        ``{"available": True, "repositories": [{"repository", "open", "items": [{"id",
        "kind", "title"}]}]}``, repositories with open items only, most open first;
        ``available`` is False (and the list empty) when the index cannot be read.
    """
    import sqlite3

    from ..reflections.fold import now_utc, stale_cutoffs
    from ..reflections.index import ReflectionIndex, index_path
    from ..reflections.known import known_repos
    from ..reflections.store import Store

    now = now_utc()
    cutoffs = stale_cutoffs(now)
    out: list[dict[str, Any]] = []

    def entry(item: Any) -> dict[str, Any]:
        shown_item = {"id": item.id, "kind": item.kind, "title": item.title}
        if bodies:
            data = item.to_json(now)
            shown_item.update(
                title=cut(data["title"], 300),
                body=cut(data.get("body"), TEXT_MAX),
                created_at=data.get("created_at"),
                by=data.get("by"),
            )
        return shown_item

    try:
        index = ReflectionIndex(index_path(settings.home))
    except (OSError, sqlite3.Error):
        return {"available": False, "repositories": []}
    try:
        for repo in known_repos(index, settings.kb_path):
            Store(repo, "dashboard", index).refresh()
            items, total = index.fresh_open(repo.key, cutoffs, shown)
            if total:
                out.append(
                    {
                        "repository": repo.display,
                        "open": total,
                        "items": [entry(i) for i in items[:shown]],
                    }
                )
    except (OSError, sqlite3.Error):
        return {"available": False, "repositories": []}
    finally:
        index.close()
    out.sort(key=lambda r: (-r["open"], r["repository"]))
    return {"available": True, "repositories": out}


def newest_errors(settings: Settings, *, limit: int = 5) -> list[dict[str, Any]]:
    """The newest unacknowledged errors: the ledger's and the hook's of the last 24 hours.

    Args:
        settings: The settings (the ledger and ``$REFLECT_HOME``'s ``hook-errors.log``).
        limit: At most this many.

    Returns:
        Rows in the errors ledger's shape (:func:`reflect_jobs.ledger.admin.list_errors`;
        a hook error has ``source`` ``hook``), most recent first.
    """
    from ..hook_errors import as_error_rows

    rows = admin.list_errors(settings.db_url) + as_error_rows(settings.home)
    rows.sort(key=lambda r: r["last_at"], reverse=True)
    return rows[:limit]


def overview(settings: Settings) -> dict[str, Any]:
    """Everything the page renders at once (one snapshot per refresh).

    Args:
        settings: The settings.

    Returns:
        ``status`` (the ``status --json`` document), ``series`` (:func:`spend_series`),
        ``cap`` (the daily cap on paid calls), ``stuck`` (:func:`stuck_jobs`), ``notes``
        (:func:`recent_notes`), ``errors`` (:func:`newest_errors`)
        and ``open_items`` (:func:`open_items_by_repository`).
    """
    from ..status import collect_status

    return {
        "status": collect_status(settings),
        "series": spend_series(settings.db_url),
        "cap": settings.daily_max,
        "stuck": stuck_jobs(settings.db_url),
        "notes": recent_notes(settings.kb_path),
        "errors": newest_errors(settings),
        "open_items": open_items_by_repository(settings),
    }
