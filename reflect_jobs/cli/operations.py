"""Commands for running the system: the consumer, money, the schema, the dashboard.

``worker``, ``drain``, ``cost``, ``db upgrade|check|rebuild`` and ``ui``. Heavy modules
(Huey, the index, the web stack) are imported inside the command that needs them. Watching
it (``status``, ``doctor``, ``statusline``) is :mod:`.health`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

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
        "not in the notes, so starting empty: job history, cost rows, session watermarks, "
        "chunk hashes (the next capture of a session reflects it whole again) and each "
        "confirmation's record (the counts, last confirmations and forget_after are back)"
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


COMMANDS = (worker, drain, cost, db, ui)
