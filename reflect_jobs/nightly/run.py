"""The nightly pass: each repository's parts in order, then the dated report.

Order per repository, and why: the **analyzer** reads the window's sessions ($0) and opens
an ``action`` item per unfinished thread that has none; **revert demotion** runs before
**dreaming** so a learning demoted tonight also leaves MEMORY.md tonight; the **weekly
synthesis** (the one paid part, :mod:`.synthesis`) last. The report is written once all
repositories are done.

Gates: the kill switch and ``REFLECT_DRAIN_DRY_RUN`` stop everything (no write, no call);
the write stage's halt flag stops everything too (an install fault: ``resume`` first); the
schedule (``REFLECT_NIGHTLY_AT``, :mod:`.schedule`) unless ``--now``; the run's claim (one run
at a time, :mod:`.state`). The paid part adds the write lease, the quota gate and one unit of
``REFLECT_NIGHTLY_DAILY_MAX`` (``caps:nightly:<day>``), never the writer's.

Every part is idempotent (derived item ids, a report rewritten whole for its day, a
MEMORY.md splice that is a fixed point, demotions that skip what is demoted), and a
repository's window start is kept for the day, so a run killed anywhere (failpoint
``nightly:after_repo``) and run again ends as an uninterrupted run would have.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.exc import SQLAlchemyError

from reflect_jobs import harnesses, kb, userconfig
from reflect_jobs.config import Settings
from reflect_jobs.faults import failpoint
from reflect_jobs.gates import dry_run as dry_run_gate
from reflect_jobs.gates import first_defer, kill_switch
from reflect_jobs.ledger import control
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.limits import CounterStorage
from reflect_jobs.recall.block import inert
from reflect_jobs.repo import Repo, RepoError, listed, repo_for
from reflect_jobs.write_lease import WriteLease

from . import analyzer, commits, dreaming, memory_md, report, revert, schedule, state

log = structlog.get_logger("reflect_jobs.nightly")
#: The first run's window, and how far back a session's commits are matched to reverts.
FIRST_WINDOW = timedelta(days=7)
REVERT_WINDOW = timedelta(days=30)

__all__ = ["NightlyResult", "run_nightly"]


@dataclass
class NightlyResult:
    """What one ``nightly`` invocation did (``--json`` prints :meth:`to_json`).

    ``status``: ``done``, ``dry_run``, ``not_due``, ``running`` (another run holds the
    claim), ``disabled`` (kill switch or drain dry run) or ``halted``.
    """

    status: str
    detail: str = ""
    date: str = ""
    report: str = ""
    repos: list[dict[str, Any]] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Every field as plain data.

        Returns:
            ``{"status", "detail", "date", "report", "repos", "deferred"}``.
        """
        return asdict(self)


def _window(db_url: str, key: str, date: str, now: datetime) -> tuple[datetime, dict[str, Any]]:
    """The repository's window start: kept for the day (a re-run sees the same sessions)."""
    flag = state.read(db_url, state.flag_key("analyzer", key)) or {}
    try:
        if flag.get("date") == date:
            since = datetime.fromisoformat(flag["since"])
        else:
            since = datetime.fromisoformat(flag["at"])
    except (KeyError, TypeError, ValueError):
        since = now - FIRST_WINDOW
    return since, flag


def _claude_home(environ: dict[str, str]) -> str:
    return harnesses.home_of(harnesses.get("claude"), environ)


def _store(key: str, root: str | None, environ: dict[str, str]) -> Any:
    from reflect_jobs.reflections.store import open_store

    return open_store(root if root and os.path.isdir(root) else key, root or os.getcwd(), environ)


def _unfinished(
    section: report.RepoSection,
    scan: analyzer.RepoScan,
    since: datetime,
    environ: dict[str, str],
    dry_run: bool,
) -> None:
    """Sessions that ended with work left; an ``action`` item for each that has none."""
    recent = [s for s in scan.sessions.values() if s.last_at and s.last_at >= since]
    if not recent:
        return
    try:
        store = _store(scan.key, scan.root, environ)
    except (RepoError, OSError, sqlite3.Error) as exc:
        section.notes.append(f"reflection store unavailable: {exc}")
        return
    try:
        store.refresh()
        open_items = store.items("open")
        for info in sorted(recent, key=lambda s: s.session_id):
            uid = analyzer.unfinished_uid(scan.key, info.session_id)
            own = [i for i in open_items if i.session == info.session_id and i.uid != uid]
            reasons = list(analyzer.ended_how(info.transcript_path))
            if own:
                reasons.append(f"{len(own)} open item(s) of its own")
            if not reasons:
                continue
            entry: dict[str, Any] = {
                "session": info.session_id,
                "harness": info.harness,
                "reasons": reasons,
                "items": [i.id for i in own],
            }
            if not own and not dry_run:
                # derived ids: a re-run (or one resumed after a kill) writes nothing twice
                store.record(
                    "add",
                    uid,
                    eid=uid,
                    by="reflector",
                    kind="action",
                    title=f"Finish session {info.session_id[:12]}: it ended {' and '.join(reasons)}",
                    body=f"Found by the nightly analyzer in {info.transcript_path}.",
                    session=info.session_id,
                )
                store.refresh()
                with contextlib.suppress(Exception):
                    entry["item"] = store.find(uid[:8]).id
            section.unfinished.append(entry)
    finally:
        store.close()


def _reverts(
    section: report.RepoSection,
    scan: analyzer.RepoScan,
    settings: Settings,
    now: datetime,
    dry_run: bool,
) -> int:
    """Demote the learnings of sessions whose commits were reverted; returns how many now."""
    found_repo = repo_for(scan.root) if scan.root else None
    if found_repo is None or not found_repo.in_git:
        section.notes.append("no git repository here: the revert check was skipped")
        return 0
    if not any(s.commits for s in scan.sessions.values()):
        return 0
    try:
        found = commits.reverts(found_repo.root or scan.root or "", now - REVERT_WINDOW)
    except OSError as exc:
        section.notes.append(f"revert check failed: {exc}")
        return 0
    demotions = revert.match(scan, found)
    changed = revert.demote(settings.db_url, scan.key, demotions, dry_run=dry_run)
    section.reverts = [
        {
            "commit": d.commit,
            "reverted_by": d.reverted_by,
            "session": d.session_id,
            "ids": d.learning_ids,
        }
        for d in demotions
    ]
    return changed


def _dream(
    section: report.RepoSection,
    scan: analyzer.RepoScan,
    settings: Settings,
    promoter: tuple[bool, str],
    environ: dict[str, str],
    dry_run: bool,
) -> dreaming.Promotion:
    """The managed section of the repository's MEMORY.md, if this machine promotes."""
    if not scan.root:
        out = dreaming.Promotion(status="skipped", detail="no working tree on this machine")
    else:
        target = memory_md.memory_file(_claude_home(environ), scan.root)
        if target is None:
            out = dreaming.Promotion(
                status="skipped", detail="the project path is too long to name its directory"
            )
        elif not promoter[0] and not dry_run:
            out = dreaming.Promotion(path=str(target), status="not_promoter", detail=promoter[1])
            log.info("not promoting", repo=scan.key, why=promoter[1])
        else:
            limit = min(settings.memory_lines, memory_md.MAX_SECTION_LINES)
            chosen = dreaming.eligible(settings.db_url, scan.key, limit)
            out = dreaming.promote(target, chosen, max_lines=limit, dry_run=dry_run)
    section.memory = asdict(out)
    section.memory["ids"] = list(out.ids)
    if out.status == "refused":
        section.notes.append(out.detail)
    return out


def _diary(section: report.RepoSection, promo: dreaming.Promotion) -> str:
    demoted = sorted({i for r in section.reverts for i in r["ids"]})
    parts = [f"{len(section.sessions)} session(s) since {section.since}."]
    if section.repeated:
        titles = "; ".join(
            f"“{inert(r['title'], 120)}” ({len(r['sessions'])} sessions)" for r in section.repeated
        )
        parts.append(f"The same correction came back: {titles}.")
    if section.unfinished:
        parts.append(f"{len(section.unfinished)} session(s) ended with work left.")
    if demoted:
        parts.append(f"A revert demoted {len(demoted)} learning(s): {', '.join(demoted)}.")
    if promo.status in ("written", "unchanged"):
        parts.append(f"MEMORY.md holds {len(promo.ids)} promoted learning(s) ({promo.status}).")
    elif promo.status:
        parts.append(f"MEMORY.md: {promo.status}{' — ' + promo.detail if promo.detail else ''}.")
    return " ".join(parts)


def _repos(settings: Settings, now: datetime, repo_dir: str | None) -> dict[str, analyzer.RepoScan]:
    only: Repo | None = None
    if repo_dir is not None:
        only = repo_for(os.path.abspath(os.path.expanduser(repo_dir)))
        if only is None:
            raise RepoError(f"--repo {repo_dir!r} is not a directory")
    scans = analyzer.scan_jobs(settings.db_url, now - REVERT_WINDOW, only.key if only else None)
    if only is not None:
        scan = scans.setdefault(only.key, analyzer.RepoScan(only.key))
        scan.root = only.root
    return scans


def run_nightly(
    settings: Settings,
    storage: CounterStorage,
    *,
    force: bool = False,
    repo_dir: str | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    environ: dict[str, str] | None = None,
    lease: WriteLease | None = None,
    kb_changed: Callable[[], None] | None = None,
) -> NightlyResult:
    """Run the nightly pass if it is due (or ``force``), over every repository or one.

    Args:
        settings: The settings.
        storage: Huey's storage (the nightly units, for the paid part).
        force: Run whatever the schedule says (``--now``).
        repo_dir: Only this repository (``--repo DIR``).
        dry_run: Find and report (printed, not written); no item, no file, no call.
        now: The time (tests); ``None`` for the clock.
        environ: The environment (``REFLECT_HOST``, ``CLAUDE_CONFIG_DIR``, ``HOME``).
        lease: The write lease for the paid part; ``None`` takes none.
        kb_changed: Called when notes changed (a demotion): asks for a reindex.

    Returns:
        What happened.

    Raises:
        RepoError: ``repo_dir`` is not a directory.
    """
    from reflect_jobs.envpaths import environ as merged_environ
    from reflect_jobs.reflections.events import host_name

    env = merged_environ(environ)
    off = first_defer([kill_switch(settings.disabled), dry_run_gate(settings.dry_run)])
    if off is not None:
        return NightlyResult("disabled", f"{off.reason}: nothing runs")
    with session_scope(settings.db_url, readonly=True) as session:
        halted = control.halt_reason(session)
    if halted:
        return NightlyResult("halted", f"write stage halted: {halted} (`reflect-jobs resume`)")
    now = now or datetime.now(UTC)
    date = now.astimezone().strftime("%Y-%m-%d")
    if not force and not schedule.due(now, settings.nightly_at, state.last_run(settings.db_url)):
        return NightlyResult("not_due", f"next at {settings.nightly_at} local", date)
    host = host_name(env)
    if not dry_run and not state.claim_run(settings.db_url, now):
        return NightlyResult("running", "another nightly run is in progress", date)
    completed = False
    try:
        result = _run(settings, storage, env, host, now, date, repo_dir, dry_run, lease, kb_changed)
        # Done for this slot even when a repository failed or the synthesis was deferred
        # (the report says so; its flags are not advanced, so the next night tries again):
        # a periodic check must not redo every $0 part each minute until a cap resets.
        completed = True
        return result
    finally:
        if not dry_run:
            with contextlib.suppress(SQLAlchemyError):
                state.finish_run(settings.db_url, now, completed=completed and repo_dir is None)


def _run(
    settings: Settings,
    storage: CounterStorage,
    env: dict[str, str],
    host: str,
    now: datetime,
    date: str,
    repo_dir: str | None,
    dry_run: bool,
    lease: WriteLease | None,
    kb_changed: Callable[[], None] | None,
) -> NightlyResult:
    from . import synthesis

    scans = _repos(settings, now, repo_dir)
    promoter = (False, "dry run") if dry_run else _promoter(settings, host, now)
    result = NightlyResult("dry_run" if dry_run else "done", date=date)
    sections: list[report.RepoSection] = []
    demoted = 0
    ignore = userconfig.ignored(env)
    for key in sorted(scans):
        scan = scans[key]
        if ignore and listed(Repo(key, scan.root), ignore):
            log.info("nightly skips an ignored repository", repo=key)
            continue  # `reflect-jobs ignore`: told nothing, promoted nothing, reported nothing
        since, _flag = _window(settings.db_url, key, date, now)
        section = report.RepoSection(key, f"{since:%Y-%m-%d %H:%M} UTC")
        section.sessions = sorted(
            s.session_id for s in scan.sessions.values() if s.last_at and s.last_at >= since
        )
        promo = dreaming.Promotion()
        try:
            section.repeated = [
                {
                    "title": r.title,
                    "ids": list(r.learning_ids),
                    "sessions": list(r.sessions),
                    "how": r.how,
                }
                for r in analyzer.repeated_corrections(settings.db_url, key, since, scan)
            ]
            _unfinished(section, scan, since, env, dry_run)
            demoted += _reverts(section, scan, settings, now, dry_run)
            promo = _dream(section, scan, settings, promoter, env, dry_run)
            section.candidates = analyzer.memory_candidates(settings.db_url, key, set(promo.ids))
            syn = synthesis.maybe_synthesize(
                settings, storage, key, now, dry_run=dry_run, lease=lease
            )
            section.observations = syn.observations
            if syn.deferred:
                result.deferred.append(f"{key}: {syn.deferred}")
            if syn.note:
                section.notes.append(syn.note)
        except (
            OSError,
            ValueError,
            RuntimeError,
            kb.NoteError,
            sqlite3.Error,
            SQLAlchemyError,
        ) as exc:
            # one repository's failure (a store, a file, the ledger) leaves the others to run
            log.warning("nightly repository failed", repo=key, error=f"{type(exc).__name__}: {exc}")
            section.notes.append(f"failed: {type(exc).__name__}: {exc}")
            result.deferred.append(f"{key}: {type(exc).__name__}")
        sections.append(section)
        if not dry_run:
            name = Repo(key).name
            report.write_diary(settings.kb_path, name, date, _diary(section, promo))
            failpoint("nightly:after_repo")  # a repository done, its window not yet recorded
            state.write(
                settings.db_url,
                state.flag_key("analyzer", key),
                {"date": date, "since": since.isoformat(), "at": now.isoformat(), "repo": key},
            )
        result.repos.append(
            {
                "repo": key,
                "sessions": len(section.sessions),
                "repeated": len(section.repeated),
                "unfinished": len(section.unfinished),
                "memory": section.memory.get("status", ""),
                "demoted": sorted({i for r in section.reverts for i in r["ids"]}),
                "observations": len(section.observations),
            }
        )
    text = report.render(date, sections)
    if dry_run:
        result.report = text
    else:
        result.report = str(report.write_report(settings.kb_path, date, text))
    if demoted and kb_changed is not None and not dry_run:
        kb_changed()  # the demoted notes leave the indexes and the session-start block
    log.info("nightly", status=result.status, repos=len(sections), demoted=demoted)
    return result


def _promoter(settings: Settings, host: str, now: datetime) -> tuple[bool, str]:
    """Whether this machine writes MEMORY.md tonight (``REFLECT_PROMOTE``, then the lease)."""
    if settings.promote == "0":
        return False, "REFLECT_PROMOTE=0 on this machine"
    try:
        return state.claim_promoter(settings.db_url, host, now)
    except SQLAlchemyError as exc:
        return False, f"the promoter lease could not be read: {type(exc).__name__}"
