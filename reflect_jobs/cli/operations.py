"""Commands for running and watching the system: the consumer, health, money, the schema.

``worker``, ``drain``, ``status``, ``doctor``, ``cost``, ``db upgrade|check|rebuild`` and ``ui``. Heavy modules
(Huey, the index) are imported inside the command that needs them, so ``status --line`` in a
shell prompt does not pay for a model it never loads.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..config import Settings
from ..perms import private_dir
from .common import emit, get_settings, quiet_libraries, table


@click.command()
@click.option("--workers", "-w", type=int, default=None, help="Worker threads (default 2).")
def worker(workers: int | None) -> None:
    """Run the consumer (huey_consumer) in the foreground; SIGTERM stops it gracefully.

    \f
    This process is replaced (``exec``) by Huey's consumer (``python -m workers.run``,
    ``huey_consumer``'s main) with thread workers, a task timeout of ``max(30,
    timeout_sec)`` seconds, stale locks flushed, and its log in
    ``$REFLECT_HOME/consumer.log``, rotated at ``REFLECT_DRAIN_LOG_MAX_BYTES``.

    Args:
        workers: Worker threads; ``None`` uses the default (2).
    """
    s = get_settings()
    exe = sys.executable
    argv = [
        exe,
        "-m",
        "workers.run",  # huey_consumer's main with a rotating consumer.log
        "workers.consumer.huey",
        "-w",
        str(workers or s.workers),
        "-k",
        "thread",
        "-g",
        "TERM",
        "-t",
        str(max(30, s.timeout_sec)),
        "-f",  # flush locks left by a killed consumer
        "-l",
        str(s.home / "consumer.log"),
    ]
    private_dir(s.home)
    os.execv(exe, argv)  # the consumer inherits the CLI's private umask


@click.command()
@click.option("--until-idle", is_flag=True, help="Stop when no job is runnable now.")
@click.option("--max-seconds", type=float, default=None, help="Stop after this long in any case.")
@click.option("--workers", "-w", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
def drain(until_idle: bool, max_seconds: float | None, workers: int | None, as_json: bool) -> None:
    """Run a consumer in this process (for cron, tests and the demo).

    \f
    Args:
        until_idle: Stop when no job is runnable now (see
            :func:`reflect_jobs.drain.run_drain`).
        max_seconds: Stop after this many seconds in any case.
        workers: Worker threads; ``None`` uses the default (2).
        as_json: Print the summary (seconds, jobs per state) as JSON.
    """
    s = get_settings()
    from ..drain import run_drain

    summary = run_drain(
        s, until_idle=until_idle, max_seconds=max_seconds, workers=workers or s.workers
    )
    if as_json:
        emit(summary)
    else:
        click.echo(
            f"drained in {summary['seconds']:.1f}s: "
            + ", ".join(f"{k}={v}" for k, v in summary["counts"].items())
        )


def status_data(s: Settings) -> dict[str, Any]:
    """What ``status --json`` prints.

    Args:
        s: The settings.

    Returns:
        See :func:`reflect_jobs.status.collect_status`.
    """
    from ..status import collect_status

    return collect_status(s)


def queue_line(queue: dict[str, Any]) -> str:
    """The human form of ``status``'s ``queue`` block, e.g. ``3 captures waiting (1 spooled)``.

    Args:
        queue: ``status --json``'s ``queue`` object (``pending``, ``captures``, ``spooled``).

    Returns:
        One line: the captures waiting (how many of the spool's entries there are, when
        any), then other messages waiting; ``empty`` when nothing waits.
    """
    captures, pending, spooled = queue["captures"], queue["pending"], queue["spooled"]
    parts = []
    if captures:
        parts.append(f"{captures} capture{'s' if captures != 1 else ''} waiting")
        if spooled:
            parts[-1] += f" ({spooled} spooled)"
    if pending - captures:
        parts.append(f"{pending - captures} other message(s) waiting")
    return ", ".join(parts) or "empty"


def open_items_part(cwd: str) -> str:
    """The ``status --line`` part counting the current repository's open reflection items.

    Read from the status line's cache (``statusline.py``: taken again only when the logs
    changed or after two minutes, as the session-start hook reads items), so a shell prompt
    calling this often stays cheap.

    Args:
        cwd: The current directory.

    Returns:
        ``" open:N"`` (N = open, not stale) inside a git repository whose store has logs;
        ``""`` outside one, or when the count cannot be read (a status line never fails).
    """
    from ..statusline import counts_for

    try:
        counts = counts_for(cwd)  # the status line's cache (statusline.py)
    except Exception:  # noqa: BLE001 - a bad mapping file or locked index: no count shown
        return ""
    if counts is None:
        return ""
    return f" open:{counts['open']}"


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--line", is_flag=True, help="One line, for shell prompts and status lines.")
def status(as_json: bool, line: bool) -> None:
    """Counts by state, budget, run window, quota gate, last success and warnings.

    \f
    Args:
        as_json: Print :func:`status_data` as JSON.
        line: Print one line (counts, budget, a halt flag, the number of warnings).
    """
    s = get_settings()
    data = status_data(s)
    if as_json:
        emit(data)
        return
    counts = data["counts"]
    if line:
        parts = [f"{k}:{v}" for k, v in counts.items() if v]
        b = data["budget"]
        flag = " HALTED" if data["halted"] else ""
        warn = f" ⚠{len(data['warnings'])}" if data["warnings"] else ""
        waiting = data["queue"]["captures"]
        parts += [f"captures:{waiting}"] if waiting else []
        click.echo(
            f"reflect {' '.join(parts) or 'idle'} budget {b['used']}/{b['limit']}"
            f"{open_items_part(os.getcwd())}{flag}{warn}"
        )
        return
    click.echo(
        click.style("reflect-jobs status", bold=True)
        + f"  (db {data['stores']['db']}, queue {data['stores']['queue']})"
    )
    click.echo("jobs: " + (", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"))
    click.echo("queue: " + queue_line(data["queue"]))
    b, r, q = data["budget"], data["run_window"], data["quota"]
    window = (
        f"run window {r['used']}/{r['limit']} (resets {r['resets_at']})"
        if r["limit"] is not None
        else "no run window (REFLECT_DRAIN_DEBOUNCE_SEC=0)"
    )
    click.echo(f"budget {b['day']}: {b['used']}/{b['limit']} used; {window}")
    click.echo(
        f"quota gate: {q['gate'].upper()}" + (f" ({q['reason']})" if q.get("reason") else "")
    )
    sess = data["sessions"]
    owed = (
        f"; {sess['idle_owed']} owed an idle deep pass (next {sess['next_idle_at']})"
        if sess["idle_owed"]
        else ""
    )
    click.echo(f"checkpoints: {sess['checkpoints']}; {sess['tracked']} session(s) tracked{owed}")
    pending = data["proposals"]["pending"]
    if pending:
        click.echo(
            f"retire proposals: {pending} pending (daily retire cap) — `reflect-jobs proposals`"
        )
    else:
        click.echo("retire proposals: none pending")
    waiting = data.get("review", {}).get("pending", 0)
    if waiting:
        click.echo(f"review: {waiting} learning(s) waiting for review — `reflect-jobs review`")
    click.echo(
        f"last success: {data['last_success_at'] or 'never'}; worker heartbeat: {data.get('heartbeat_at') or 'never'}"
    )
    from ..consumers import describe

    for c in data["workers"]:
        click.echo(f"running: {describe(c)}")
    if data["hook_errors"]:
        click.echo(f"hook errors: {data['hook_errors']} in the last 24 h (`reflect-jobs errors`)")
    if data["halted"]:
        click.secho(
            f"WRITE STAGE HALTED: {data['halt_reason']} — fix it, run `reflect-jobs doctor`, then `reflect-jobs resume`",
            fg="red",
            bold=True,
        )
    for w in data["warnings"]:
        click.secho(f"warning: {w}", fg="yellow")


@click.command()
@click.option("--json", "as_json", is_flag=True)
def doctor(as_json: bool) -> None:
    """Check the installation; print the fix for each failure; exit 1 if any fails.

    \f
    Args:
        as_json: Print :func:`reflect_jobs.doctor.run_checks` as JSON.
    """
    s = get_settings()
    quiet_libraries(s)
    from ..config import resolve
    from ..doctor import run_checks

    checks = run_checks(s, resolve())
    if as_json:
        emit(checks)
    else:
        for c in checks:
            mark = (
                click.style("ok  ", fg="green")
                if c["ok"]
                else click.style("FAIL", fg="red", bold=True)
            )
            click.echo(f"{mark} {c['name']}: {c['detail']}")
            if not c["ok"] and c.get("fix"):
                click.echo(f"     fix: {c['fix']}")
    if not all(c["ok"] for c in checks):
        sys.exit(1)


@click.command()
@click.option(
    "--since", default="30d", show_default=True, help="A window like 30d, 24h, 2w, 90m, or all."
)
@click.option(
    "--by",
    type=click.Choice(["day", "transcript", "model", "outcome", "writer", "backend"]),
    default="day",
    show_default=True,
)
@click.option(
    "--top", type=int, default=15, show_default=True, help="Rows shown (not for --by day)."
)
@click.option("--outlier-tokens", type=int, default=5_000_000, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def cost(since: str, by: str, top: int, outlier_tokens: int, as_json: bool) -> None:
    """What the writer spent, grouped (⚠ marks a bucket with an outlier run).

    Columns: runs = recorded model calls (every attempt, paid or free); entries = budget
    units charged (what the daily cap counts); tokens = all tokens of those calls, cache
    included; cache_rd = tokens read from the prompt cache (cheap); io = input + output
    tokens (the part not served from cache); $est = the cost the CLI reported, else tokens
    × the price table (REFLECT_PRICES extends it).

    \f
    Args:
        since: The window (see :func:`reflect_jobs.ledger.spend.parse_since`), or
            ``all``; anything else (``7x``, a negative window) is refused (exit 2).
        by: ``day``, ``transcript``, ``model``, ``outcome``, ``writer`` or ``backend``.
        top: Rows shown, the largest by tokens (all rows for ``--by day``).
        outlier_tokens: A single run above this many tokens marks its bucket.
        as_json: Print :func:`reflect_jobs.ledger.admin.cost_report` as JSON.
    """
    from ..ledger import admin
    from ..ledger.spend import parse_since

    window = parse_since(since)
    if (window is None and since.strip().lower() != "all") or (window and window.days < 0):
        raise click.BadParameter(
            f"{since!r}: use a number and a unit, like 30d, 24h, 2w or 90m, or all",
            param_hint="'--since'",
        )
    s = get_settings()
    report = admin.cost_report(s.db_url, by=by, since=window)
    if as_json:
        emit(report)
        return
    if not report["rows"]:
        click.echo(f"No reflect cost events in the last {since}.")
        return
    items = list(report["rows"].items())
    if by != "day":
        items = sorted(items, key=lambda kv: -kv[1]["tokens"])[:top]
    t = report["total"]
    rows = [_cost_cells(k, v, outlier_tokens) for k, v in items]
    rows.append(_cost_cells("TOTAL", t, None))
    click.echo(table(rows, [by, "runs", "entries", "tokens", "cache_rd", "io", "$est"]))
    click.echo(
        "runs: model calls recorded; entries: budget units charged (the daily cap counts "
        "these); tokens: all tokens, cache included; cache_rd: tokens read from the prompt "
        "cache; io: input + output tokens; $est: reported cost, else tokens x prices"
    )
    click.echo(
        f"cache reuse: {t['cache_reuse'] * 100:.1f}% of tokens were cache reads"
        " ($est uses per-model prices when the CLI reported none)"
    )
    outliers = [k for k, v in report["rows"].items() if v["max_run_tokens"] > outlier_tokens]
    if outliers:
        click.secho(
            f"⚠ a single run over {outlier_tokens:,} tokens in: {', '.join(outliers)}", fg="yellow"
        )


def _cost_cells(key: str, v: dict[str, Any], outlier_tokens: int | None) -> list[Any]:
    flag = (
        " ⚠" if outlier_tokens is not None and v.get("max_run_tokens", 0) > outlier_tokens else ""
    )
    return [
        key,
        v["runs"],
        v["entries"],
        v["tokens"],
        v["cache_read"],
        v["io"],
        f"${v['cost_usd']:.4f}{flag}",
    ]


@click.group()
def db() -> None:
    """The ledger database."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply Alembic migrations up to head."""
    s = get_settings()
    from ..config import redact_url
    from ..ledger.db import get_engine, migration_status

    engine = get_engine(s.db_url)
    cur, head = migration_status(engine)
    click.echo(f"ledger {redact_url(s.db_url)} at revision {cur} (head {head})")


@db.command("check")
@click.option("--json", "as_json", is_flag=True)
def db_check(as_json: bool) -> None:
    """Check the ledger: the SQLite file's integrity and its schema; exit 1 with the fix.

    \f
    Args:
        as_json: Print ``{"ok", "path", "problem", "revision", "head"}``.
    """
    s = get_settings()
    from ..config import redact_url
    from ..ledger.rebuild import check

    found = check(s.db_url)
    if as_json:
        emit(found.to_json())
    elif found.ok:
        click.echo(
            f"ledger {redact_url(s.db_url)}: ok (integrity checked, revision {found.revision})"
        )
    else:
        click.echo(found.problem, err=True)
    if not found.ok:
        sys.exit(1)


@db.command("rebuild")
@click.option("--force", is_flag=True, help="Rebuild even though the ledger is not damaged.")
def db_rebuild(force: bool) -> None:
    """Set a damaged SQLite ledger aside and rebuild it from the notes.

    \f
    The learnings and their proof come back from the notes' frontmatter; job history, cost
    rows, session watermarks and chunk hashes are not in the notes and start empty (see
    :mod:`reflect_jobs.ledger.rebuild`). Stop the worker first.

    Args:
        force: Rebuild a ledger that is not damaged (its file is set aside all the same).
    """
    s = get_settings()
    from ..ledger.db import damage_line, sqlite_file
    from ..ledger.rebuild import rebuild

    if sqlite_file(s.db_url) is None:
        raise click.UsageError(
            "db rebuild works on a SQLite ledger; restore PostgreSQL from its backup"
        )
    if damage_line(s.db_url) is None and not force:
        raise click.ClickException(
            "the ledger is not damaged (`reflect-jobs db check`); "
            "`db rebuild --force` sets it aside and rebuilds it from the notes anyway"
        )
    done = rebuild(s.db_url, s.kb_path)
    if done.kept is not None:
        click.echo(f"the old ledger is kept as {done.kept}")
    click.echo(
        f"ledger rebuilt from the notes: {done.learnings} learning(s), {done.sources} proof "
        f"source(s); {len(done.skipped)} note(s) skipped"
    )
    for line in done.skipped[:20]:
        click.echo(f"  skipped {line}", err=True)
    click.echo(
        "not in the notes, so starting empty: job history, cost rows, session watermarks "
        "and chunk hashes (the next capture of a session reflects it whole again)"
    )


#: ``reflect-jobs ui``'s port when ``--port`` is not given.
UI_PORT = 8377


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=UI_PORT,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port; the URL printed names it).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
def ui(port: int, open_browser: bool) -> None:
    """Serve the dashboard on 127.0.0.1 until Ctrl-C (needs the ``ui`` extra).

    \f
    The socket is bound before the URL is printed, so a busy port is a one-line error and
    ``--port 0`` prints the port it got. The web stack is imported here only.

    Args:
        port: The port; 0 picks a free one.
        open_browser: Open the URL with Python's :mod:`webbrowser` once it is listening.

    Raises:
        click.ClickException: The ``ui`` extra is missing, or the port cannot be bound
            (exit 1).
    """
    import socket

    s = get_settings()
    try:
        import uvicorn

        from ..dashboard.app import create_app
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs the ui extra ({exc.name} is missing): "
            "pip install 'reflect-jobs[ui]'"
        ) from None
    from .. import tasks
    from ..dashboard.token import new_token

    quiet_libraries(s)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    app = create_app(s, token=new_token(), schedule=tasks.HueyDispatcher().schedule)
    click.echo(f"reflect-jobs ui: {url} (Ctrl-C stops it)")
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--cwd", "where", default=None, help="Count this directory's repository.")
def statusline(where: str | None) -> None:
    """Open items at a glance for Claude Code's statusLine (reads its JSON on stdin).

    \f
    The console script serves this without the CLI (``reflect_jobs/entry.py``); this command
    is the same code for ``--help`` and in-process callers.

    Args:
        where: A directory instead of the payload's.
    """
    from ..statusline import main as run

    run(["--cwd", where] if where else [])


COMMANDS = (worker, drain, status, doctor, cost, db, ui, statusline)
