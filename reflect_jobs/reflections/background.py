"""The worker's side of the reflection index: refresh every known repository, bounded.

Readers that must stay fast (the session-start hook, ``status --line``) read the last
committed index and leave a request when the logs moved beyond their budget
(:mod:`.requests`). The periodic task ``tasks.refresh_reflections`` calls
:func:`refresh_known` every minute: the requested repositories first, then every repository
this machine knows (:func:`.known.known_repos`), each a stat scan when nothing changed. It
works until a deadline and never waits for another refresh of the same file (one already
running does the work); a big log is indexed over several runs, each committed.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .index import ReflectionIndex, index_path
from .known import known_repos
from .requests import clear_request, pending_requests

__all__ = ["RefreshReport", "known_log_dirs", "refresh_known"]


def known_log_dirs(index: ReflectionIndex, kb: Path) -> dict[str, Path]:
    """``repo key -> log directory`` of every repository :func:`.known.known_repos` lists.

    Args:
        index: This machine's index.
        kb: ``$GLOBAL_LEARNINGS_PATH``.

    Returns:
        The log directories by repo key (whichever shape ``known_repos`` returns: a mapping
        of keys to log directories, or repositories with ``key`` and ``log_dir``).
    """
    known: Any = known_repos(index, kb)
    if isinstance(known, dict):
        return {key: Path(log_dir) for key, log_dir in known.items()}
    return {repo.key: Path(repo.log_dir) for repo in known}


@dataclass
class RefreshReport:
    """What one background run did: repositories looked at, refreshed, left for later."""

    repos: int = 0
    refreshed: int = 0
    events: int = 0
    unfinished: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def refresh_known(
    reflect_home: Path, kb: Path, own: str, *, budget_sec: float | None = 40.0
) -> RefreshReport:
    """Refresh the requested and the known repositories' indexes until ``budget_sec`` ends.

    Args:
        reflect_home: ``$REFLECT_HOME`` (the index and the requests).
        kb: ``$GLOBAL_LEARNINGS_PATH`` (the default memory homes).
        own: This machine's host name (its logs are read first).
        budget_sec: Seconds of work at most (``None``: until done).

    Returns:
        The counts; a repository whose refresh could not finish is in ``unfinished`` (its
        request stays, the next run goes on from what was committed).
    """
    deadline = None if budget_sec is None else time.monotonic() + budget_sec
    report = RefreshReport()
    requested = pending_requests(str(reflect_home))
    index = ReflectionIndex(index_path(reflect_home))
    try:
        repos = {k: Path(v) for k, v in requested.items()}
        for key, log_dir in known_log_dirs(index, kb).items():
            repos.setdefault(key, log_dir)
        for key, log_dir in repos.items():
            report.repos += 1
            try:
                stats = index.refresh(key, log_dir, own=own, deadline=deadline, blocking=False)
            except sqlite3.DatabaseError as exc:
                report.errors.append(f"{key}: {exc}")
                index.reset()
                continue
            report.events += stats.events
            report.refreshed += int(stats.changed)
            if not stats.complete:
                report.unfinished.append(key)
            elif key in requested:
                clear_request(str(reflect_home), requested[key])
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        index.close()
    return report
