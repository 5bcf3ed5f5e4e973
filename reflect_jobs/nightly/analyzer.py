"""The session analyzer ($0): per repository, over the sessions since its last run.

It finds **repeated corrections** (one learning confirmed from two or more sessions, or
learnings of different sessions whose title or person-quoted evidence is the same text),
**unfinished work** (a session that ended with open items of its own, failing tests or an
interrupted turn) and **memory candidates** (the repository's best-confirmed learnings that
are told but not promoted yet). Everything is read from the ledger, the reflection store
and the last :data:`TAIL_BYTES` of each transcript: no model, no full transcript read.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from reflect_jobs.fsio import open_regular
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, Learning, LearningSource
from reflect_jobs.lifecycle import is_told

#: How much of a transcript's end is read for how the session ended.
TAIL_BYTES = 64 * 1024
#: At most this many jobs are looked at per run (newest first): a bounded scan.
MAX_JOBS = 20_000
_INTERRUPTED = (b"[Request interrupted by user", b"<turn_aborted>", b"turn_aborted")
_FAILING = re.compile(rb"(?<!\d)\d+ failed\b|\bFAILED\b|\bTests? failed\b|npm ERR! Test failed")
_SUMMARY = re.compile(_FAILING.pattern + rb"|(?<!\d)\d+ passed\b|All tests passed\b")

__all__ = [
    "RepoScan",
    "Repeated",
    "SessionInfo",
    "Unfinished",
    "ended_how",
    "memory_candidates",
    "repeated_corrections",
    "scan_jobs",
    "unfinished_uid",
]


@dataclass
class SessionInfo:
    """One session of the repository seen in the window."""

    harness: str
    session_id: str
    transcript_path: str
    jobs: list[str] = field(default_factory=list)
    last_at: datetime | None = None
    commits: list[str] = field(default_factory=list)


@dataclass
class RepoScan:
    """A repository's sessions in the window and its working tree on this machine."""

    key: str
    root: str | None = None
    sessions: dict[str, SessionInfo] = field(default_factory=dict)


@dataclass(frozen=True)
class Repeated:
    """A correction seen in two or more sessions."""

    title: str
    learning_ids: tuple[str, ...]
    sessions: tuple[str, ...]
    how: str  # "confirmed" (one learning, several sources) | "same text"


@dataclass(frozen=True)
class Unfinished:
    """A session that ended with work left, and why."""

    session_id: str
    harness: str
    reasons: tuple[str, ...]
    open_items: tuple[str, ...]  # ids of its own open items


def _repo_of(stats: Any) -> tuple[str, str | None] | None:
    repo = stats.get("repo") if isinstance(stats, dict) else None
    if not isinstance(repo, dict) or not isinstance(repo.get("key"), str) or not repo["key"]:
        return None
    root = repo.get("root")
    return repo["key"], root if isinstance(root, str) and root else None


def scan_jobs(db_url: str, since: datetime, only: str | None = None) -> dict[str, RepoScan]:
    """The sessions each repository had since ``since``, from the jobs (bounded).

    Args:
        db_url: The ledger.
        since: The window's start.
        only: Keep this repository key only.

    Returns:
        ``{repo key: RepoScan}``; a job without a repository (no working directory) is left
        out. ``root`` is a working tree that exists on this machine, else ``None``.
    """
    out: dict[str, RepoScan] = {}
    with session_scope(db_url, readonly=True) as session:
        rows = session.execute(
            select(
                Job.id,
                Job.harness,
                Job.session_id,
                Job.transcript_path,
                Job.prepare_stats,
                Job.updated_at,
            )
            .where(Job.updated_at >= since)
            .order_by(Job.updated_at.desc())
            .limit(MAX_JOBS)
        ).all()
    for job_id, harness, sid, path, stats, at in rows:
        found = _repo_of(stats)
        if found is None or (only is not None and found[0] != only):
            continue
        key, root = found
        scan = out.setdefault(key, RepoScan(key))
        if scan.root is None and root and os.path.isdir(root):
            scan.root = root
        info = scan.sessions.setdefault(sid, SessionInfo(harness, sid, path))
        info.jobs.append(job_id)
        info.last_at = max(info.last_at or at, at)
        commits = stats.get("commits") if isinstance(stats, dict) else None
        for c in commits if isinstance(commits, list) else []:
            if isinstance(c, str) and c not in info.commits:
                info.commits.append(c)
    return out


def _norm(text: str | None) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", (text or "").lower()).split())


def repeated_corrections(db_url: str, key: str, since: datetime, scan: RepoScan) -> list[Repeated]:
    """Corrections of the repository seen in two or more sessions, confirmed in the window.

    Args:
        db_url: The ledger.
        key: The repository key.
        since: The window's start (a learning counts when a source came in it).
        scan: The window's sessions (to name a source by its session id).

    Returns:
        Repeated corrections, most sessions first.
    """
    by_path = {s.transcript_path: s.session_id for s in scan.sessions.values()}
    out: list[Repeated] = []
    with session_scope(db_url, readonly=True) as session:
        touched = set(
            session.scalars(
                select(LearningSource.learning_id)
                .join(Learning, Learning.id == LearningSource.learning_id)
                .where(Learning.repo_key == key, LearningSource.at >= since)
                .limit(MAX_JOBS)
            )
        )
        rows = (
            list(session.scalars(select(Learning).where(Learning.id.in_(touched))))
            if touched
            else []
        )
        sources: dict[str, list[str]] = defaultdict(list)
        for lid, src in session.execute(
            select(LearningSource.learning_id, LearningSource.source).where(
                LearningSource.learning_id.in_(touched)
            )
        ):
            sources[lid].append(src)
        unknown = {s for srcs in sources.values() for s in srcs if s not in by_path}
        if unknown:
            for path, sid in session.execute(
                select(Job.transcript_path, Job.session_id)
                .where(Job.transcript_path.in_(list(unknown)[:1000]))
                .limit(MAX_JOBS)
            ):
                by_path.setdefault(path, sid)
        session.expunge_all()
    seen_in: dict[str, set[str]] = {}
    for row in rows:
        if not is_told(row.status) and row.status != "proposed":
            continue
        sids = {by_path.get(s, os.path.basename(s)) for s in sources[row.id]}
        if row.session_id:
            sids.add(row.session_id)
        seen_in[row.id] = sids
        if len(sids) >= 2:
            out.append(Repeated(row.title, (row.id,), tuple(sorted(sids)), "confirmed"))
    groups: dict[str, list[Learning]] = defaultdict(list)
    for row in rows:
        if row.id in seen_in and len(seen_in[row.id]) < 2:
            for text in {
                _norm(row.title),
                _norm(row.evidence) if row.evidence_origin == "person" else "",
            }:
                if len(text) >= 12:
                    groups[text].append(row)
    done: set[tuple[str, ...]] = set()
    for members in groups.values():
        ids = tuple(sorted({m.id for m in members}))
        sessions = sorted({s for m in members for s in seen_in[m.id]})
        if len(ids) >= 2 and len(sessions) >= 2 and ids not in done:
            done.add(ids)
            out.append(Repeated(members[0].title, ids, tuple(sessions), "same text"))
    out.sort(key=lambda r: (-len(r.sessions), r.title, r.learning_ids))
    return out


def ended_how(path: str) -> tuple[str, ...]:
    """How a session ended, read from the transcript's last :data:`TAIL_BYTES`.

    Args:
        path: The transcript.

    Returns:
        ``interrupted`` (the last turn was cut short) and/or ``tests failing`` (the last
        test run the tail shows failed); empty when neither, or the file is unreadable.
    """
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read(TAIL_BYTES)
    except OSError:
        return ()
    reasons = []
    last_lines = tail.rstrip().rsplit(b"\n", 3)[-3:]
    if any(m in line for line in last_lines for m in _INTERRUPTED):
        reasons.append("interrupted")
    last = max(_SUMMARY.finditer(tail), key=lambda m: m.start(), default=None)
    if last is not None:
        # the line of the last test summary: "2 failed, 40 passed" is a failing run
        start = max(tail.rfind(b"\n", 0, last.start()), tail.rfind(b"\\n", 0, last.start()))
        ends = [i for i in (tail.find(b"\n", last.end()), tail.find(b"\\n", last.end())) if i != -1]
        line = tail[start + 1 : min(ends) if ends else len(tail)]
        if _FAILING.search(line):
            reasons.append("tests failing")
    return tuple(reasons)


def unfinished_uid(key: str, session_id: str) -> str:
    """The action item's uid for a session's unfinished thread: derived, so a re-run (or a
    run killed after writing it) finds the same item instead of adding another.

    Args:
        key: The repository key.
        session_id: The session.

    Returns:
        16 hex digits.
    """
    return hashlib.sha256(f"nightly\x1f{key}\x1f{session_id}".encode()).hexdigest()[:16]


def memory_candidates(
    db_url: str, key: str, promoted: set[str], limit: int = 10
) -> list[dict[str, Any]]:
    """The repository's most-confirmed told learnings not promoted yet.

    Args:
        db_url: The ledger.
        key: The repository key.
        promoted: Ids already in the managed section.
        limit: At most this many.

    Returns:
        ``[{"id", "title", "proof_count"}]``, most proof first.
    """
    with session_scope(db_url, readonly=True) as session:
        rows = session.execute(
            select(Learning.id, Learning.title, Learning.proof_count, Learning.status)
            .where(
                Learning.repo_key == key, Learning.status == "active", Learning.is_latest.is_(True)
            )
            .order_by(Learning.proof_count.desc(), Learning.updated_at.desc(), Learning.id)
            .limit(limit + len(promoted))
        ).all()
    return [
        {"id": lid, "title": title, "proof_count": proof}
        for lid, title, proof, status in rows
        if lid not in promoted and is_told(status)
    ][:limit]
