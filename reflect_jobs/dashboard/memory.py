"""What the dashboard's memory browser shows: learnings, the review queue, open items, jobs.

The queue view (:mod:`.data`) says whether the machinery runs; this one says what it
remembers, so a person can judge it: each learning with its rule, scope, confidence, age,
evidence and (where the ledger knows it) its verification verdict, grouped per repository;
what waits for review; every open item with its body. Everything comes from the modules that
own it — the ledger's rows (:mod:`reflect_jobs.ledger.review` for the review queue), the
note files for the rule (the ledger keeps no rule), the Reflection Store for items — and is
returned as plain JSON-able data; nothing here imports the web stack.

Note and item text is written by a model or a synced log from transcripts: hostile input.
It is returned as plain strings and the renderer escapes every one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from ..config import Settings
from ..ledger import admin
from ..ledger.db import session_scope
from ..ledger.models import Job, Learning, utcnow
from ..lifecycle import ACTIVE, JOB_STATES, LEARNING_STATUSES, PROPOSED
from .data import cut, open_items_by_repository

#: Learnings listed per repository (the count says how many more there are).
PER_REPOSITORY = 25
#: Statuses of learnings out of circulation that ``restore`` brings back (forgotten,
#: superseded, withheld as stale…): every status but the told and the waiting one.
WITHHELD_STATUSES = tuple(sorted(LEARNING_STATUSES - {ACTIVE, PROPOSED}))
#: The label of learnings that hold in every repository.
GLOBAL = "global"
#: Where ``forget`` moves a note (``pipeline/curation.py``).
FORGOTTEN = ".forgotten"
#: A note larger than this is not read for its rule (a note is a few kilobytes).
NOTE_MAX_BYTES = 1 << 20
#: path → (mtime_ns, size, rule) so a refresh does not parse every note's YAML again.
_RULES: dict[str, tuple[int, int, str]] = {}


def _age_days(at: datetime | None, now: datetime) -> int | None:
    return None if at is None else max(0, (now - at).days)


def note_rule(kb_path: Path, note_path: str | None) -> str:
    """A learning's rule, read from its note (cached by the file's mtime and size).

    Only a regular file inside the KB is read: ``note_path`` comes from the ledger, and a
    link planted in ``documents/`` must not make the page show another file's text.

    Args:
        kb_path: The KB root.
        note_path: The ledger's path of the note (absolute, or relative to the KB).

    Returns:
        The frontmatter's ``rule`` (empty when the file is gone, not a note, or outside).
    """
    from ..fsio import read_inside
    from ..kb.parse import NoteError, parse_note

    if not note_path:
        return ""
    path = Path(note_path)
    path = path if path.is_absolute() else kb_path / path
    if not os.path.lexists(path):  # a forgotten note waits in documents/.forgotten/
        path = path.parent / FORGOTTEN / path.name
    try:
        parts = path.relative_to(kb_path).parts
        st = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return ""  # gone, or a path the ledger names outside the KB
    key = str(path)
    cached = _RULES.get(key)
    if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
        return cached[2]
    try:
        text = read_inside(kb_path, *parts, max_bytes=NOTE_MAX_BYTES).decode("utf-8", "replace")
        rule = str(parse_note(text).frontmatter.get("rule") or "")
    except (OSError, ValueError, NoteError):
        rule = ""
    if len(_RULES) > 4096:
        _RULES.clear()
    _RULES[key] = (st.st_mtime_ns, st.st_size, rule)
    return rule


def learning_dict(row: Learning, kb_path: Path, now: datetime) -> dict[str, Any]:
    """One learning as the memory browser shows it.

    Args:
        row: The ledger row.
        kb_path: The KB root (its note holds the rule).
        now: The time ages are measured from.

    Returns:
        ``id``, ``title``, ``rule``, ``scope``, ``repository`` (``global`` for a global
        learning), ``status``, ``confidence``, ``proof``, ``age_days``, ``evidence``,
        ``evidence_origin``, ``anchors`` and ``verdict`` (the last verification's verdict
        when the ledger records one, else ``None``).
    """
    return {
        "id": row.id,
        "title": cut(row.title, 300),
        "rule": cut(note_rule(kb_path, row.note_path)),
        "scope": row.scope,
        "repository": row.repo_key if row.scope == "repo" and row.repo_key else GLOBAL,
        "status": row.status,
        "confidence": float(row.confidence_num or 0.0),
        "proof": int(row.proof_count or 0),
        "age_days": _age_days(row.updated_at or row.created_at, now),
        "evidence": cut(row.evidence),
        "evidence_origin": row.evidence_origin,
        "anchors": [
            {"path": str(a.get("path", "")), "symbol": str(a.get("symbol") or "")}
            for a in (row.anchors or [])
            if isinstance(a, dict)
        ][:10],
        "verdict": None,
    }


#: Recall-log records the memory view lists (newest first).
RECALL_SHOWN = 20


def recall_log(settings: Settings, *, shown: int = RECALL_SHOWN) -> list[dict[str, Any]]:
    """What recent sessions were told (``recall-log.jsonl``, the hook's record), newest first.

    Args:
        settings: The settings (``$REFLECT_HOME``).
        shown: At most this many records.

    Returns:
        The records with ``at`` (ISO 8601 UTC) beside ``ts``; ``[]`` when there is no log.
    """
    from datetime import UTC

    from ..recall import told_log

    out = []
    for rec in reversed(told_log.read(str(settings.home))[-shown:]):
        ts = rec.get("ts")
        at = (
            datetime.fromtimestamp(float(ts), UTC).isoformat(timespec="seconds")
            if isinstance(ts, int | float)
            else ""
        )
        out.append({**rec, "at": at})
    return out


def verdicts(settings: Settings, learnings: list[dict[str, Any]]) -> None:
    """Fill each learning's ``verdict`` from what session starts found (in place).

    The check itself needs a working tree, which only a session has; the dashboard shows
    its outcome: the stale streak the hooks counted (``verify.db``) and whether a session
    start told the learning after checking its anchors (the recall log).

    Args:
        settings: The settings (``$REFLECT_HOME``).
        learnings: :func:`learning_dict` entries.
    """
    import sqlite3

    from ..lifecycle import STALE_ANCHORS
    from ..recall import verify_store

    streaks: dict[str, tuple[int, str]] = {}
    path = verify_store.store_path(str(settings.home))
    if os.path.exists(path):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.25)
            try:
                streaks = {
                    r[0]: (int(r[1]), str(r[2]))
                    for r in conn.execute("SELECT id, stale, missing FROM streaks WHERE stale > 0")
                }
            finally:
                conn.close()
        except sqlite3.Error:
            streaks = {}
    told: set[str] = set()
    for rec in recall_log(settings, shown=500):
        told.update(str(i) for i in rec.get("learnings") or [])
    for item in learnings:
        stale, missing = streaks.get(item["id"], (0, ""))
        if item["status"] == STALE_ANCHORS:
            item["verdict"] = "stale: every anchor gone (out of circulation)"
        elif stale:
            item["verdict"] = f"stale at {stale} session start(s)" + (
                f": {missing[:200]} gone" if missing else ""
            )
        elif not item["anchors"]:
            item["verdict"] = "unanchored"
        elif item["id"] in told:
            item["verdict"] = "anchors held when last told"
        else:
            item["verdict"] = None


def learnings_by_repository(
    settings: Settings,
    *,
    statuses: Iterable[str] = (ACTIVE,),
    per_repository: int = PER_REPOSITORY,
) -> dict[str, Any]:
    """Learnings grouped per repository, strongest first, global ones in their own group.

    Args:
        settings: The settings (the ledger and the KB).
        statuses: Which statuses to list (the told ones by default).
        per_repository: At most this many per group; ``total`` says how many there are.

    Returns:
        ``{"repositories": [{"repository", "total", "learnings": [...]}]}``: one group per
        repository key (most learnings first, ``global`` last), each learning as
        :func:`learning_dict`.
    """
    wanted = tuple(statuses)
    now = utcnow()
    group = func.coalesce(Learning.repo_key, "")
    with session_scope(settings.db_url, readonly=True) as session:
        counts = {
            (scope, key): int(n)
            for scope, key, n in session.execute(
                select(Learning.scope, group, func.count())
                .where(Learning.status.in_(wanted))
                .group_by(Learning.scope, group)
            )
        }
        totals: dict[str, int] = {}
        for (scope, key), n in counts.items():
            label = key if scope == "repo" and key else GLOBAL
            totals[label] = totals.get(label, 0) + n
        out = []
        for label in sorted(totals, key=lambda k: (k == GLOBAL, -totals[k], k)):
            query = select(Learning).where(Learning.status.in_(wanted))
            if label == GLOBAL:
                query = query.where((Learning.scope != "repo") | (group == ""))
            else:
                query = query.where(Learning.scope == "repo", Learning.repo_key == label)
            rows = session.scalars(
                query.order_by(
                    Learning.proof_count.desc(),
                    Learning.confidence_num.desc(),
                    Learning.updated_at.desc(),
                    Learning.id,
                ).limit(per_repository)
            )
            out.append(
                {
                    "repository": label,
                    "total": totals[label],
                    "learnings": [learning_dict(r, settings.kb_path, now) for r in rows],
                }
            )
    return {"repositories": out}


def review_queue(settings: Settings) -> list[dict[str, Any]]:
    """The learnings waiting for review, as ``review --json`` lists them, plus their rule.

    Args:
        settings: The settings (the ledger, ``REFLECT_REVIEW_BELOW``, the KB).

    Returns:
        :func:`reflect_jobs.ledger.review.list_proposed` rows, oldest first, then the
        pending global learnings (``pipeline/global_cap.py:with_pending``: told only in
        their repository until a second session or a person confirms them), each with
        ``proposed_scope`` (``"global"`` or ``None``), ``rule``, ``scope``, ``repository``
        and ``age_days``, and ``evidence`` cut to :data:`TEXT_MAX` characters.
    """
    from ..ledger import review
    from ..pipeline import global_cap

    now = utcnow()
    with session_scope(settings.db_url, readonly=True) as session:
        rows = review.list_proposed(session, review_below=settings.review_below, limit=200)
        # And the pending globals, as ``review`` lists them (one reader: global_cap's; one
        # ledger query, no note read: a page loaded often).
        rows = global_cap.with_pending(session, rows, limit=200)
        where = {
            lid: (scope, key, at)
            for lid, scope, key, at in session.execute(
                select(Learning.id, Learning.scope, Learning.repo_key, Learning.created_at).where(
                    Learning.id.in_([r["id"] for r in rows])
                )
            )
        }
    for r in rows:
        scope, key, at = where.get(r["id"], ("global", None, None))
        r["scope"] = scope
        r["repository"] = key if scope == "repo" and key else GLOBAL
        r["age_days"] = _age_days(at, now)
        r["rule"] = cut(note_rule(settings.kb_path, r.get("note_path")))
        r["evidence"] = cut(r.get("evidence"))
        r["title"] = cut(r.get("title"), 300)
    return rows


def items_by_repository(settings: Settings, *, shown: int = 20) -> dict[str, Any]:
    """Every repository's open items with their bodies (handoffs first), for Done and Drop.

    Args:
        settings: The settings (the KB root, ``$REFLECT_HOME`` for the index).
        shown: At most this many items per repository.

    Returns:
        :func:`reflect_jobs.dashboard.data.open_items_by_repository` with bodies: each item
        ``id``, ``kind``, ``title``, ``body``, ``created_at`` and ``by``.
    """
    return open_items_by_repository(settings, shown=shown, bodies=True)


def change_item(settings: Settings, repository: str, ident: str, op: str, note: str) -> str:
    """Close (``done``) or drop one open item, with the person's note, as the CLI does.

    Args:
        settings: The settings.
        repository: The item's repository key (as :func:`items_by_repository` names it).
        ident: The item's id.
        op: ``done`` or ``drop``.
        note: The evidence or reason (required, as on the command line).

    Returns:
        The item's status after the change.

    Raises:
        ValueError: A bad ``op``, an empty note, or an unknown repository (one line).
        reflect_jobs.reflections.store.StoreError: The store refused (unknown id, wrong status).
    """
    from ..reflections.fold import now_utc
    from ..reflections.index import ReflectionIndex, index_path
    from ..reflections.known import known_repos
    from ..reflections.store import Store

    if op not in ("done", "drop"):
        raise ValueError(f"op must be done or drop, got {op!r}")
    note = " ".join(str(note or "").split())
    if not note:
        raise ValueError("a note is required: the evidence it is done, or why it is dropped")
    index = ReflectionIndex(index_path(settings.home))
    try:
        repo = next((r for r in known_repos(index, settings.kb_path) if r.key == repository), None)
        if repo is None:
            raise ValueError(f"no repository {repository!r} in the Reflection Store")
        store = Store(repo, "dashboard", index)
        store.refresh()
        item = store.change(op, ident, note=note[:2000], by="person")
        return str(item.to_json(now_utc())["status"])
    finally:
        index.close()


def jobs(
    settings: Settings, *, state: str | None = None, stage: str | None = None, limit: int = 50
) -> dict[str, Any]:
    """The jobs list, newest first, filtered by state and stage.

    Args:
        settings: The settings (the ledger).
        state: Only jobs in this state (one of :data:`reflect_jobs.lifecycle.JOB_STATES`).
        stage: Only jobs at this stage.
        limit: At most this many.

    Returns:
        ``{"jobs": [job_dict…], "states": [...], "stages": [...]}``: the filters' choices
        are what the ledger holds, so the page never offers an empty one.

    Raises:
        ValueError: ``state`` is not a job state.
    """
    if state and state not in JOB_STATES:
        raise ValueError(f"state must be one of {', '.join(JOB_STATES)}, got {state!r}")
    with session_scope(settings.db_url, readonly=True) as session:
        query = select(Job)
        if state:
            query = query.where(Job.state == state)
        if stage:
            query = query.where(Job.stage == stage)
        rows = [
            admin.job_dict(j)
            for j in session.scalars(query.order_by(Job.updated_at.desc()).limit(limit))
        ]
        stages = sorted(s for (s,) in session.execute(select(Job.stage).distinct()) if s)
        states = sorted(s for (s,) in session.execute(select(Job.state).distinct()) if s)
    return {"jobs": rows, "states": states, "stages": stages}


def memory(settings: Settings) -> dict[str, Any]:
    """Everything the memory view renders at once.

    Args:
        settings: The settings.

    Returns:
        ``learnings`` (:func:`learnings_by_repository`), ``withheld`` (the same over
        :data:`WITHHELD_STATUSES`: what Restore brings back), each learning's ``verdict``
        filled by :func:`verdicts`, ``recall_log`` (:func:`recall_log`), ``review``
        (:func:`review_queue`) and ``items`` (:func:`items_by_repository`).
    """
    told = learnings_by_repository(settings)
    withheld = learnings_by_repository(settings, statuses=WITHHELD_STATUSES)
    verdicts(
        settings,
        [x for group in (told, withheld) for g in group["repositories"] for x in g["learnings"]],
    )
    return {
        "learnings": told,
        "withheld": withheld,
        "recall_log": recall_log(settings),
        "review": review_queue(settings),
        "items": items_by_repository(settings),
    }
