"""``reflect-jobs doctor``: every check prints what it found and the command that fixes it.

The checks are the failure modes behind the original's silent outages: a writer binary that
is missing or answers "Unknown command" with zero turns (the 11-day outage), a schema that
was never migrated, an index that lags the notes, a consumer that is not running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import timedelta
from typing import Any

from .config import Settings


def _check(name: str, ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "fix": fix if not ok else ""}


def check_backend(s: Settings) -> dict[str, Any]:
    backend = s.resolved_writer_backend()
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
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, "REFLECT_DRAIN_CHILD": "1"},
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
    try:
        from .queue import make_huey

        huey = make_huey(s)
        pending = huey.pending_count()
    except Exception as exc:  # noqa: BLE001
        return _check(
            "queue",
            False,
            f"{s.redacted_urls()['queue']}: {type(exc).__name__}: {exc}",
            "check REFLECT_QUEUE_URL (and that Redis is running for redis:// URLs)",
        )
    return _check("queue", True, f"{s.redacted_urls()['queue']}: {pending} message(s) pending")


def check_kb(s: Settings) -> dict[str, Any]:
    from . import kb
    from .index.lexical import LexicalIndex
    from .index.search import staleness

    try:
        paths = kb.kb_paths(s.kb_path)
        probe = paths.documents / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
        lex = LexicalIndex(paths.index / "lexical.db")
        try:
            intact = lex.check()
            lag = staleness(s.kb_path, lex)
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


def check_heartbeat(s: Settings) -> dict[str, Any]:
    from .ledger import control
    from .ledger.db import session_scope
    from .ledger.models import utcnow

    with session_scope(s.db_url) as session:
        beat = control.last_heartbeat(session)
        halt = control.halt_reason(session)
    if halt:
        return _check(
            "write stage",
            False,
            f"halted: {halt}",
            "fix the cause above, then `reflect-jobs resume`",
        )
    if beat is None:
        return _check(
            "worker",
            False,
            "no consumer has ever run",
            "reflect-jobs install service (or run `reflect-jobs worker`)",
        )
    age = utcnow() - beat
    return _check(
        "worker",
        age < timedelta(minutes=5),
        f"last heartbeat {int(age.total_seconds())}s ago",
        "start the consumer: `reflect-jobs worker` or `systemctl --user restart reflect-jobs`",
    )


def run_checks(s: Settings) -> list[dict[str, Any]]:
    return [check_backend(s), check_ledger(s), check_queue(s), check_kb(s), check_heartbeat(s)]
