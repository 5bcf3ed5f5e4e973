"""``reflect-jobs doctor``: every check prints what it found and the command that fixes it.

The checks are the failure modes behind the original's silent outages: a writer binary that
is missing or answers "Unknown command" with zero turns (the 11-day outage), a schema that
was never migrated, an index that lags the notes, a consumer that is not running — plus the
two ways an install goes quietly wrong: hooks that were never wired (or point at a venv that
moved, so every session ends with nothing captured) and an embedding model that only loads
with network access (a hub-name lookup hangs for over a minute offline).

Every check is free: the writer is probed with ``--version`` (or, for an API writer, a model
listing) only, never a model call.

This module holds the stores' checks (writer, ledger, queue, halt flag, reflection logs) and
:func:`run_checks`; the KB and embedding checks are :mod:`.doctor_kb`, the harness hooks'
:mod:`.doctor_hooks`, the configuration's and the worker's :mod:`.doctor_config`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .config import Settings
from .doctor_check import check
from .doctor_hooks import check_hooks
from .doctor_kb import check_embeddings, check_kb
from .markers import CHILD_ENV


def check_backend(s: Settings) -> dict[str, Any]:
    """The writer CLI is on PATH and answers ``--version`` (within 20 s, with no stdin).

    The heuristic writer needs nothing and always passes. The API writers (openai,
    anthropic, codex) are probed for real by ``writer.probe``: endpoint reachable, key
    accepted, model listed (a free model listing, never a completion).

    Args:
        s: The settings (``writer_backend``, ``claude_bin``).

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``.
    """
    backend = s.resolved_writer_backend()
    if backend == "claude":  # the CLI lists no models: their names are checked as written
        from .writer.probe import models_check

        bad_model = models_check(s, backend)
        if bad_model is not None:
            return bad_model
    if backend in ("openai", "anthropic", "codex"):
        from .writer.probe import probe_backend  # imports the SDK only for its backend

        probed = probe_backend(s)
        if probed is not None:
            return probed
    if backend == "heuristic":
        return check(
            "writer backend", True, "heuristic writer (no model; low-confidence learnings)"
        )
    path = shutil.which(s.claude_bin)
    if path is None:
        return check(
            "writer backend",
            False,
            f"{s.claude_bin!r} not found on PATH",
            "install Claude Code (npm i -g @anthropic-ai/claude-code) or set REFLECT_DRAIN_CLAUDE_BIN / REFLECT_WRITER_BACKEND=heuristic",
        )
    try:
        out = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,  # a CLI that waits for a prompt must not hang doctor
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, CHILD_ENV: "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return check(
            "writer backend", False, f"{path} --version failed: {exc}", f"check that {path} runs"
        )
    version = (out.stdout or out.stderr).strip().splitlines()[:1]
    return check(
        "writer backend",
        out.returncode == 0,
        f"{path} {version[0] if version else ''}".strip(),
        f"{path} --version exits {out.returncode}: reinstall it",
    )


def check_ledger(s: Settings) -> dict[str, Any]:
    """The ledger opens and its schema is at the newest migration.

    Opening it migrates a ledger that is behind (see
    :func:`reflect_jobs.ledger.db.get_engine`), so in practice this fails only when the
    database cannot be reached or the migration itself fails.

    Args:
        s: The settings (``db_url``).

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``.
    """
    from .ledger.db import get_engine, migration_status

    try:
        engine = get_engine(s.db_url)
        cur, head = migration_status(engine)
    except Exception as exc:  # noqa: BLE001
        return check(
            "ledger",
            False,
            f"{s.redacted_urls()['db']}: {type(exc).__name__}: {exc}",
            "check REFLECT_DB_URL, then run `reflect-jobs db upgrade`",
        )
    return check(
        "ledger",
        cur == head,
        f"{s.redacted_urls()['db']} at revision {cur} (head {head})",
        "reflect-jobs db upgrade",
    )


def check_queue(s: Settings) -> dict[str, Any]:
    """The queue (SQLite file or Redis) answers; the detail says how many messages wait.

    A SQLite queue file that is not a usable database fails with the fix (a consumer start
    rebuilds it); one rebuilt before says so, naming the damaged copy that was kept.

    Args:
        s: The settings (``queue_url``).

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``.
    """
    from .queue import GARBLED, make_huey
    from .sqlitefile import damage as sqlite_damage

    path = None if s.queue_is_redis else Path(s.queue_url[len("sqlite:///") :])
    damage = sqlite_damage(path) if path is not None else None
    if damage is not None:
        return check(
            "queue",
            False,
            f"{path} is unusable ({damage})",
            "the next `reflect-jobs worker` or `drain` moves it aside and starts an empty "
            "queue (the ledger and the spool keep every job and capture): run "
            "`reflect-jobs drain --until-idle` now, or restart the service",
        )
    try:
        huey = make_huey(s)
        pending = huey.pending_count()
    except Exception as exc:  # noqa: BLE001
        return check(
            "queue",
            False,
            f"{s.redacted_urls()['queue']}: {type(exc).__name__}: {exc}",
            "check REFLECT_QUEUE_URL (and that Redis is running for redis:// URLs)",
        )
    detail = f"{s.redacted_urls()['queue']}: {pending} message(s) pending"
    kept = sorted(path.parent.glob(f"{path.name}.{GARBLED}-*")) if path is not None else []
    kept = [k for k in kept if not k.name.endswith(("-wal", "-shm"))]
    if kept:
        detail += (
            f"; rebuilt {len(kept)} time(s) after the file was garbled (nothing was lost: "
            f"the ledger and the spool are the truth), the last damaged copy kept as "
            f"{kept[-1]} — delete it once you no longer need it"
        )
    return check("queue", True, detail)


def check_halt(s: Settings) -> dict[str, Any] | None:
    """A failed ``write stage`` check when the write stage is halted, else None.

    Args:
        s: The settings (``db_url``).

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, or None when it runs (or the ledger
        cannot be read: the ledger check says so).
    """
    from .ledger import control
    from .ledger.db import session_scope

    try:
        with session_scope(s.db_url) as session:
            halt = control.halt_reason(session)
    except Exception:  # noqa: BLE001 - the ledger check reports it
        return None
    if not halt:
        return None
    return check(
        "write stage",
        False,
        f"halted: {halt}",
        "fix the cause above, then `reflect-jobs resume`",
    )


def check_reflections(s: Settings) -> dict[str, Any]:
    """The reflection logs as last indexed: events ignored per log, a refresh left waiting.

    A host log speaks only for its host (ARCHITECTURE §14): events claiming another host or
    reusing an event id are ignored, invalid lines and lines over 64 KiB skipped. Read from
    the index read-only (no refresh: doctor stays free); ``reflections doctor --all``
    refreshes and lists every log.

    Args:
        s: The settings (``home``: the index and the refresh requests).

    Returns:
        A check: failing when a log held ignored events, or a refresh request has waited
        more than 10 minutes (no worker serving them).
    """
    import sqlite3
    import time

    from .reflections.cli_doctor import IGNORED, describe
    from .reflections.index_schema import COUNTERS
    from .reflections.requests import DIR

    name = "reflection logs"
    path = s.home / "reflections-index.db"
    if not path.exists():
        return check(name, True, "no reflection index yet")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            rows = conn.execute(
                f"SELECT repo, path, events, {', '.join(COUNTERS)} FROM logs ORDER BY repo, path"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return check(name, True, f"index not readable now ({exc}); the next refresh rebuilds it")
    keys = ("repo", "log", "events", *COUNTERS)
    logs = [dict(zip(keys, r, strict=True)) for r in rows]
    flagged = [r for r in logs if any(r[k] for k in IGNORED)]
    requests = s.home / DIR
    waiting = [
        p for p in (requests.glob("*.json") if requests.is_dir() else [])
        if time.time() - p.stat().st_mtime > 600
    ]  # fmt: skip
    problems = [f"{r['repo']}: {describe(r)}" for r in flagged]
    if waiting:
        problems.append(f"{len(waiting)} refresh request(s) waiting over 10 minutes")
    if not problems:
        return check(name, True, f"{len(logs)} log(s), nothing ignored")
    fix = (
        "a synced log spoke for another host or reused event ids: see `reflections doctor"
        " --all` and remove or fix that log"
        if flagged
        else "start the worker (`reflect-jobs worker`) or run `reflections refresh --all`"
    )
    return check(name, False, "; ".join(problems), fix)


def run_checks(s: Settings, resolved: Any = None) -> list[dict[str, Any]]:
    """Every check, in the order ``doctor`` prints them.

    The writer is checked as the *running worker* uses it when one is up (its heartbeat
    records its backend and model; the service's environment is not this shell's), and the
    configuration check compares every place a home is set (``doctor_config``).

    Args:
        s: The settings.
        resolved: The same with their sources (``config.resolve``); ``None`` resolves the
            environment again.

    Returns:
        The checks of the config file, the agreement of hooks/service/MCP/config, the
        backend, ledger, queue, KB, embedding model, each harness's hooks, the hook's
        errors, the worker and the reflection logs (``{"name", "ok", "detail", "fix"}`` each).
    """
    from dataclasses import replace

    from . import doctor_config
    from .config import resolve
    from .consumers import STALE, live_consumers
    from .ledger import control
    from .ledger.db import session_scope
    from .ledger.models import utcnow

    resolved = resolved or resolve()
    workers: list[dict[str, Any]] = []
    last_beat = None
    try:
        now = utcnow()
        with session_scope(s.db_url) as session:
            workers = live_consumers(control.heartbeats_since(session, now - STALE), now=now)
            last_beat = control.last_heartbeat(session)
    except Exception:  # noqa: BLE001 - the ledger check reports it
        pass
    running = next((w for w in workers if w.get("kind") == "worker" and w.get("model")), None)
    writer = check_backend(s)
    if running and (running["writer_backend"], running["model"]) != (
        s.resolved_writer_backend(),
        s.model,
    ):
        writer = check_backend(
            replace(s, writer_backend=running["writer_backend"], model=running["model"])
        )
        writer["detail"] = (
            f"the running worker (pid {running['pid']}) uses {running['writer_backend']} / "
            f"{running['model']} (this shell would use {s.resolved_writer_backend()} / "
            f"{s.model}): {writer['detail']}"
        )
    halted = check_halt(s)
    return [
        doctor_config.check_config_file(resolved),
        doctor_config.check_agreement(s, resolved, workers),
        writer,
        check_ledger(s),
        check_queue(s),
        check_kb(s),
        check_embeddings(s),
        *check_hooks(),
        doctor_config.check_hook_errors(s),
        halted or doctor_config.check_worker(s, workers, last_beat),
        check_reflections(s),
    ]
