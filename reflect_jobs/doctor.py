"""``reflect-jobs doctor``: every check prints what it found and the command that fixes it.

The checks are the failure modes behind the original's silent outages: a writer binary that
is missing or answers "Unknown command" with zero turns (the 11-day outage), a schema that
was never migrated, an index that lags the notes, a consumer that is not running — plus the
two ways an install goes quietly wrong: hooks that were never wired (or point at a venv that
moved, so every session ends with nothing captured) and an embedding model that only loads
with network access (a hub-name lookup hangs for over a minute offline).

Every check is free: the writer is probed with ``--version`` (or, for an API writer, a model
listing) only, never a model call.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .config import Settings
from .markers import CHILD_ENV


def _check(name: str, ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "fix": fix if not ok else ""}


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
        return _check(
            "writer backend", True, "heuristic writer (no model; low-confidence learnings)"
        )
    path = shutil.which(s.claude_bin)
    if path is None:
        return _check(
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
        return _check(
            "writer backend", False, f"{path} --version failed: {exc}", f"check that {path} runs"
        )
    version = (out.stdout or out.stderr).strip().splitlines()[:1]
    return _check(
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
        return _check(
            "ledger",
            False,
            f"{s.redacted_urls()['db']}: {type(exc).__name__}: {exc}",
            "check REFLECT_DB_URL, then run `reflect-jobs db upgrade`",
        )
    return _check(
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
        return _check(
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
        return _check(
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
    return _check("queue", True, detail)


def probe_writable(directory: Path) -> None:
    """Prove a byte can be written and synced in ``directory`` without changing its entries.

    On Linux an unnamed ``O_TMPFILE`` in the directory needs the same permission and space
    as a note and never gets a directory entry, so the folder's mtime — which
    :func:`reflect_jobs.index.maintenance.index_lags` compares — does not move. Where that
    is not supported, ``os.access`` checks the folder and the probe file is written in its
    parent (the KB root, which no staleness check watches).

    Args:
        directory: The folder to probe (``documents/``).

    Raises:
        OSError: The folder cannot be written (``EACCES``, ``EROFS``, ``ENOSPC``…).
    """
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            fd = os.open(directory, flag | os.O_WRONLY, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
        else:
            try:
                os.write(fd, b"ok")
                os.fsync(fd)
            finally:
                os.close(fd)
            return
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(directory))
    probe = directory.parent / ".doctor-probe"
    probe.write_text("ok")
    probe.unlink()


def check_kb(s: Settings) -> dict[str, Any]:
    """The KB's ``documents/`` is writable and the lexical index is intact and current.

    Probes ``documents/`` with :func:`probe_writable` (creating the KB directories when
    missing), which leaves the folder's mtime alone: a probe file created and removed there
    used to make every later ``search`` warn that the index lags the notes.

    Args:
        s: The settings (``kb_path``).

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``. It fails
        on an OS error, a corrupted lexical index, or the first staleness warning of
        :func:`reflect_jobs.index.search.staleness`.
    """
    from . import kb
    from .index.lexical import LexicalIndex
    from .index.search import staleness

    try:
        paths = kb.kb_paths(s.kb_path)
        probe_writable(paths.documents)
        lex = LexicalIndex(paths.index / "lexical.db")
        try:
            intact = lex.check()
            lag = staleness(s.kb_path)
        finally:
            lex.close()
    except OSError as exc:
        return _check(
            "knowledge base",
            False,
            f"{s.kb_path}: {exc}",
            f"make {s.kb_path} writable or set GLOBAL_LEARNINGS_PATH",
        )
    if not intact:
        return _check(
            "knowledge base", False, "lexical index is corrupted", "reflect-jobs reindex --force"
        )
    if lag:
        return _check("knowledge base", False, lag[0], "reflect-jobs reindex")
    return _check("knowledge base", True, f"{s.kb_path} writable, index current")


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
    return _check(
        "write stage",
        False,
        f"halted: {halt}",
        "fix the cause above, then `reflect-jobs resume`",
    )


EMBED_TIMEOUT_SEC = 120
_EMBED_PROBE = """
import sys, time
t = time.monotonic()
from reflect_jobs.index.embeddings import get_embedder
e = get_embedder(sys.argv[1] or None)
v = e.embed(["doctor probe"])
print(f"{e.model_name}\t{v.shape[1]}\t{time.monotonic() - t:.1f}")
"""


def check_embeddings(s: Settings, timeout: float = EMBED_TIMEOUT_SEC) -> dict[str, Any]:
    """Load the embedding model the way a worker does, with the network switched off.

    In a subprocess: torch costs ~4 s and a lot of memory the CLI should not keep, and a
    hub-name model that is not cached would otherwise hang this process.

    Args:
        s: The settings (unused: the probe reads the model choice from the environment,
            as a worker does).
        timeout: Seconds the probe may take before the check fails.

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``. It passes
        as skipped when ``REFLECT_INDEX_VECTORS`` turns vectors off; otherwise the detail
        names the model, its dimension and the load time.
    """
    name = "embedding model"
    if not s.index_vectors:
        return _check(name, True, "skipped: REFLECT_INDEX_VECTORS=0 (lexical index only)")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        CHILD_ENV: "1",
    }
    fix_model = (
        "set REFLECT_EMBED_MODEL to a local model directory (or unset it for the shipped "
        "MiniLM), or REFLECT_INDEX_VECTORS=0 to run on the lexical index only"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _EMBED_PROBE, s.embed_model or ""],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return _check(name, False, f"did not load offline within {timeout:g}s", fix_model)
    except OSError as exc:
        return _check(name, False, f"cannot start {sys.executable}: {exc}", fix_model)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit {proc.returncode}"
        missing = "No module named" in last
        fix = (
            "install the index extra: `make install` (or pip install -e '.[index]')"
            if missing
            else fix_model
        )
        return _check(name, False, f"does not load offline: {last[:300]}", fix)
    model, dim, secs = (proc.stdout.strip().splitlines() or ["?\t?\t?"])[-1].split("\t")
    return _check(name, True, f"{model} ({dim}-d) loads offline in {secs}s")


def _script_of(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return next((w for w in words if w.endswith("reflect-jobs-hook")), None)


def _hook_args(command: str) -> list[str]:
    """The arguments after the hook script in a hook command (empty if unparseable)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    at = next((i for i, w in enumerate(words) if w.endswith("reflect-jobs-hook")), None)
    return [] if at is None else words[at + 1 :]


def _event_of(args: list[str]) -> str | None:
    """The ``--event`` value among hook arguments, or None."""
    if "--event" in args and args.index("--event") + 1 < len(args):
        return args[args.index("--event") + 1]
    return None


def check_hooks(environ: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One check per harness: our hook on every event, pointing at a script that exists.

    A harness whose settings are absent is not in use here and passes (skipped).

    Args:
        environ: The environment that locates each harness's config directory (default
            ``os.environ``).

    Returns:
        One check per harness in :data:`reflect_jobs.harnesses.REGISTRY` order. A check
        fails when our hook is missing on an event, installed twice on one, installed on an
        event the registry no longer uses (``SubagentStop``), points at a missing or
        non-executable script, runs the hook for another harness, does not name its event
        with ``--event`` (an install from before it), or has a timeout the harness would
        clamp or reject. Re-running ``install hooks`` fixes all of these.
    """
    from .harnesses import REGISTRY
    from .install import (
        default_settings_path,
        harness_hook_files,
        harness_present,
        read_installed,
        read_timeout_problems,
    )

    out = []
    for harness, spec in REGISTRY.items():
        name = f"hooks ({harness})"
        fix = f"reflect-jobs install hooks --harness {harness}"
        marker = harness_present(harness, environ)
        if marker is None:
            out.append(_check(name, True, f"{spec.label} not set up here: skipped"))
            continue
        files = harness_hook_files(harness, environ)
        found: dict[str, list[str]] = {}
        where: list[str] = []
        timeouts: list[str] = []
        for f in files:
            timeouts += read_timeout_problems(f, harness)
            got = read_installed(f)
            if got:
                where.append(str(f))
            for event, cmds in got.items():
                found.setdefault(event, []).extend(cmds)
        if not found:
            target = default_settings_path(harness, environ)
            out.append(_check(name, False, f"not installed in {target}", fix))
            continue
        problems = []
        missing = [e for e in spec.event_names if e not in found]
        if missing:
            problems.append(f"missing on {', '.join(missing)}")
        twice = [e for e, cmds in found.items() if len(cmds) > 1]
        if twice:
            problems.append(f"installed twice on {', '.join(twice)} (double captures)")
        stale = [e for e in found if e not in spec.event_names]
        if stale:
            problems.append(f"installed on {', '.join(stale)}, which it no longer uses")
        for cmd in sorted({c for cmds in found.values() for c in cmds}):
            script = _script_of(cmd)
            args = _hook_args(cmd)
            if script is None or not os.access(script, os.X_OK):
                problems.append(f"points at a missing script: {cmd}")
            elif args[:1] != [harness]:
                problems.append(f"runs the hook for another harness: {cmd}")
        unnamed = [
            e
            for e in spec.event_names
            if any(_event_of(_hook_args(c)) != e for c in found.get(e, ()))
        ]
        if unnamed:
            problems.append(f"no --event or the wrong one on {', '.join(unnamed)}")
        problems += [f"{spec.label} would not take {t}" for t in timeouts]
        detail = "; ".join(problems) if problems else f"installed in {', '.join(where)}"
        out.append(_check(name, not problems, detail, fix))
    return out


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
        return _check(name, True, "no reflection index yet")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            rows = conn.execute(
                f"SELECT repo, path, events, {', '.join(COUNTERS)} FROM logs ORDER BY repo, path"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return _check(name, True, f"index not readable now ({exc}); the next refresh rebuilds it")
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
        return _check(name, True, f"{len(logs)} log(s), nothing ignored")
    fix = (
        "a synced log spoke for another host or reused event ids: see `reflections doctor"
        " --all` and remove or fix that log"
        if flagged
        else "start the worker (`reflect-jobs worker`) or run `reflections refresh --all`"
    )
    return _check(name, False, "; ".join(problems), fix)


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
