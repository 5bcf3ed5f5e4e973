"""``reflect-jobs backfill``: capture the sessions that ran before the hooks were installed.

Backfill is a bulk version of ``reflect-jobs enqueue``: every transcript goes through
:func:`reflect_jobs.pipeline.capture.run_capture`, so the gate, the caps and the quota apply later in
the pipeline exactly as for a hook capture — a backfill can queue a month of sessions but
cannot spend more than a day's budget in a day (the rest is *deferred*, free).

What it must not do is pay twice or pile up duplicates, because people run it again ("did it
work?") and after every upgrade. So a transcript is skipped, for free and without being read,
when the ledger already knows it at the same size and mtime: processed (the ``transcripts``
table, written when a job reaches ``done``), still in flight (a job not finished yet), or
failed (poisoned/quarantined: ``reflect-jobs retry`` is the way back, not a fresh job that
would fail the same way). Newest first, so the sessions most worth learning from get the
first of the budget.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from . import harnesses
from .config import Settings
from .harnesses import TranscriptLayout
from .install import harness_home
from .lifecycle import FAILED_STATES, IN_FLIGHT_STATES

_UUID_TAIL = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.I)
CHUNK = 500  # bound the IN (...) lists: SQLite's variable limit is 32766, PostgreSQL's 65535


def session_id_of(layout: TranscriptLayout, path: Path) -> str:
    """The session id a transcript file names, by its harness's layout scheme.

    Args:
        layout: The harness's transcript layout (:attr:`Harness.transcripts`).
        path: A transcript file found under the layout's root.

    Returns:
        What the harness's hook would send as the session id, so that a backfilled job and
        a later hook capture of the same live session coalesce into one job.

    Raises:
        ValueError: The layout names an unknown scheme.
    """
    if layout.session_id == "parent":
        return path.parent.name
    if layout.session_id == "uuid_tail":
        m = _UUID_TAIL.search(path.stem)
        return m.group(1) if m else path.stem
    if layout.session_id == "stem":
        return path.stem
    raise ValueError(f"unknown session id scheme {layout.session_id!r}")


def default_root(harness: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the harness keeps its session files (``backfill`` without ``--root``).

    Args:
        harness: A registry name (``claude``, ``codex`` or ``copilot``).
        environ: The environment that locates the harness's home (default ``os.environ``).

    Returns:
        E.g. ``~/.claude/projects``, ``$CODEX_HOME/sessions``, ``~/.copilot/session-state``.
    """
    return harness_home(harness, environ) / harnesses.get(harness).transcripts.root


@dataclass
class Candidate:
    """One transcript backfill found, and what it does with it."""

    path: str
    session_id: str
    size: int
    mtime: float
    action: str = "enqueue"  # or skip_unchanged / skip_pending / skip_failed
    job_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The candidate as ``backfill --json`` lists it.

        Returns:
            ``{"path", "session_id", "size", "mtime", "action", "job_id"}``.
        """
        return {
            "path": self.path,
            "session_id": self.session_id,
            "size": self.size,
            "mtime": self.mtime,
            "action": self.action,
            "job_id": self.job_id,
        }


def find_transcripts(
    root: Path, harness: str, since: timedelta | None, *, now: float | None = None
) -> list[Candidate]:
    """Transcripts under ``root`` modified within ``since`` (None: all), newest first.

    Paths are absolute but not symlink-resolved: that is the form the hooks send, and the
    form the ledger keys transcripts by.

    Args:
        root: The sessions directory (``~`` is expanded).
        harness: Which harness's file layout to search (``claude``, ``codex``, ``copilot``).
        since: Only files modified this recently; ``None`` for all of them.
        now: The time ``since`` counts back from (epoch seconds); defaults to now.

    Returns:
        One ``enqueue`` candidate per non-empty regular file that matches the layout,
        sorted by mtime (newest first), then path.
    """
    layout = harnesses.get(harness).transcripts
    base = Path(os.path.abspath(root.expanduser()))
    cutoff = None if since is None else (now or time.time()) - since.total_seconds()
    found: list[Candidate] = []
    for p in base.glob(layout.pattern):
        try:
            st = p.stat()
        except OSError:  # vanished between glob and stat
            continue
        if not p.is_file() or st.st_size == 0:
            continue
        if cutoff is not None and st.st_mtime < cutoff:
            continue
        found.append(Candidate(str(p), session_id_of(layout, p), st.st_size, st.st_mtime))
    found.sort(key=lambda c: (-c.mtime, c.path))
    return found


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), CHUNK):
        yield items[i : i + CHUNK]


def mark_known(db_url: str, candidates: list[Candidate]) -> None:
    """Set ``action`` to a ``skip_*`` reason for transcripts the ledger already has as they are.

    A candidate matches a ledger row when the path (as given or symlink-resolved), size and
    mtime are all equal. ``skip_pending`` (a job still holds it) wins over ``skip_unchanged``
    (a finished job recorded it) and ``skip_failed`` (its job was poisoned or quarantined).

    Args:
        db_url: The ledger.
        candidates: From :func:`find_transcripts`; changed in place, and only those still
            ``enqueue``.
    """
    from sqlalchemy import select

    from .ledger.db import session_scope
    from .ledger.models import Job, Transcript

    keys: dict[str, list[Candidate]] = {}
    for c in candidates:
        for k in {c.path, os.path.realpath(c.path)}:
            keys.setdefault(k, []).append(c)
    same: dict[tuple[str, int | None, float | None], str] = {}  # (path, size, mtime) -> why
    with session_scope(db_url) as session:
        for chunk in _chunks(list(keys)):
            for t in session.scalars(select(Transcript).where(Transcript.path.in_(chunk))):
                same.setdefault((t.path, t.size, t.mtime), "skip_unchanged")
            rows = session.execute(
                select(
                    Job.transcript_path, Job.transcript_size, Job.transcript_mtime, Job.state
                ).where(Job.transcript_path.in_(chunk), Job.state != "done")
            ).all()
            for path, size, mtime, state in rows:
                if state in IN_FLIGHT_STATES:
                    same[(path, size, mtime)] = "skip_pending"
                elif state in FAILED_STATES:
                    same.setdefault((path, size, mtime), "skip_failed")
    for key, cands in keys.items():
        for c in cands:
            reason = same.get((key, c.size, c.mtime))
            if reason and c.action == "enqueue":
                c.action = reason


def run_backfill(
    settings: Settings,
    harness: str,
    root: Path,
    since: timedelta | None,
    *,
    dry_run: bool = False,
    limit: int | None = None,
    settle_sec: int = 0,
    progress: Callable[[Candidate], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Find, filter and enqueue; returns the report (``found``, ``enqueued``, ``skipped``…).

    ``limit`` caps the number enqueued (the newest first); the rest count as
    ``not_enqueued``. ``on_plan(n)`` is told how many will be enqueued before the first one
    is, so a progress bar knows its length.

    Args:
        settings: The settings; its ledger is checked for known transcripts. The captures
            themselves go through :func:`reflect_jobs.tasks.runtime`, which uses the
            settings the ``tasks`` module loaded from the environment.
        harness: ``claude``, ``codex`` or ``copilot``.
        root: The sessions directory to search.
        since: Only transcripts modified this recently; ``None`` for all.
        dry_run: Find and classify only; capture nothing.
        limit: Enqueue at most this many (``None``: no limit).
        settle_sec: Seconds each job waits for further captures before preparing.
        progress: Called with each candidate after it was captured.
        on_plan: Called once with the number about to be captured (not on a dry run, nor
            when there is nothing to capture).

    Returns:
        ``harness``, ``root`` (absolute), ``since_sec``, ``dry_run``, ``disabled`` (captures
        refused by ``REFLECT_DISABLED``), ``found``, ``enqueued`` (would-be on a dry run),
        ``skipped`` and ``skipped_by`` (per ``skip_*`` reason), ``not_enqueued`` (over the
        limit or disabled) and ``transcripts`` (every candidate's :meth:`Candidate.to_dict`).
    """
    candidates = find_transcripts(root, harness, since)
    mark_known(settings.db_url, candidates)
    todo = [c for c in candidates if c.action == "enqueue"]
    over = todo[limit:] if limit is not None else []
    for c in over:
        c.action = "over_limit"
    todo = todo[:limit] if limit is not None else todo
    disabled = False
    if not dry_run and todo:
        if on_plan:
            on_plan(len(todo))
        from . import tasks
        from .logging import configure_logging
        from .pipeline.capture import run_capture

        # One "captured" line per transcript belongs in drain.log, not across a progress bar.
        configure_logging(settings, console=False)
        rt = tasks.runtime()
        for c in todo:
            c.job_id = run_capture(
                rt, harness, c.session_id, c.path, "backfill", settle_sec, deep=True
            )
            if c.job_id is None:  # REFLECT_DISABLED=1: nothing is captured
                disabled = True
                c.action = "disabled"
            if progress:
                progress(c)
    actions = Counter(c.action for c in candidates)
    skipped = {k: v for k, v in actions.items() if k.startswith("skip_")}
    return {
        "harness": harness,
        "root": str(Path(os.path.abspath(root.expanduser()))),
        "since_sec": None if since is None else int(since.total_seconds()),
        "dry_run": dry_run,
        "disabled": disabled,
        "found": len(candidates),
        "enqueued": actions["enqueue"],
        "skipped": sum(skipped.values()),
        "skipped_by": skipped,
        "not_enqueued": actions["over_limit"] + actions["disabled"],
        "transcripts": [c.to_dict() for c in candidates],
    }
