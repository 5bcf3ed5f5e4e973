"""Commands for watching the system's health: ``status``, ``doctor`` and ``statusline``.

Split from :mod:`.operations` (running it: the consumer, the drain, money, the schema, the
dashboard). ``status --line`` is read by shell prompts many times a minute: heavy modules
are imported inside the command that needs them, and the open-items count comes from the
status line's cache.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..config import Settings
from .common import emit, get_settings, quiet_libraries


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
        pending_global = data.get("review", {}).get("pending_global", 0)
        of_them = f" ({pending_global} global, awaiting a second session)" if pending_global else ""
        click.echo(
            f"review: {waiting} learning(s) waiting for review{of_them} — `reflect-jobs review`"
        )
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


COMMANDS = (status, doctor, statusline)
