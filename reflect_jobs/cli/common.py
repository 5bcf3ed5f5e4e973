"""What every ``reflect-jobs`` command shares: settings, output, and one-line failures.

ARCHITECTURE §9 fixes the CLI's contract: exit 0 on success, 1 on a handled failure, 2 on bad
usage or bad configuration; errors are one line on stderr; ``--json`` prints stable shapes.
Keeping the pieces of that contract here — a settings error is a usage error, JSON is
printed one way, a locked ledger is one sentence and not a traceback — means a command
module cannot drift from it by accident.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..config import Settings, SettingsError, load_settings
from ..harnesses import NAMES as HARNESSES

__all__ = [
    "HARNESSES",
    "Main",
    "emit",
    "get_settings",
    "known_failure",
    "quiet_libraries",
    "table",
]


def get_settings() -> Settings:
    """The validated settings, or exit 2 with the problem on one line.

    Returns:
        The settings from the environment.

    Raises:
        click.UsageError: A setting is invalid (exit code 2).
    """
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


def quiet_libraries(s: Settings) -> None:
    """Route library logging (model loading, Huey) to drain.log, not the terminal or --json.

    Args:
        s: The settings (where the log lives).
    """
    from ..logging import configure_logging

    configure_logging(s, console=False)


def emit(data: Any) -> None:
    """Print ``data`` as the indented JSON every ``--json`` flag produces.

    Args:
        data: JSON-able data; anything else (datetimes, paths) is printed as ``str()``.
    """
    click.echo(json.dumps(data, indent=2, default=str))


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """A plain left-aligned text table with bold headers.

    Args:
        rows: The cells, row by row (``None`` prints as empty).
        headers: One per column.

    Returns:
        The table's lines joined by newlines (no final newline).
    """
    cells = [[str(c) if c is not None else "" for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(
        click.style(h.ljust(w), bold=True) for h, w in zip(headers, widths, strict=True)
    )
    out = [line]
    for r in cells:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    return "\n".join(out)


def known_failure(exc: BaseException) -> str | None:
    """One clear line for failures a person can act on (ARCHITECTURE §9).

    Args:
        exc: An exception a command did not handle.

    Returns:
        The line to print (exit 1), or ``None`` when it is a bug and the traceback should show.
    """
    name, text = type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    module = type(exc).__module__
    if module.startswith("sqlalchemy") and name in ("DatabaseError", "OperationalError"):
        if name == "DatabaseError" or "malformed" in text or "not a database" in text:
            from ..ledger.db import damage_line

            try:
                damaged = damage_line(load_settings().db_url)
            except Exception:  # noqa: BLE001 - the settings were read before; be safe
                damaged = None
            if damaged:
                return damaged
        if "locked" in text:
            return "the ledger is locked by another process (waited 30 s); try again, or find the process holding reflect.db"
        return f"cannot use the ledger: {text[:300]}"
    if module.startswith("redis") and "Connection" in name:
        return f"cannot reach the Redis queue: {text[:300]}"
    if name in ("SearchError", "UnsafePath"):  # UnsafePath: a link refused (fsio.py)
        return text
    return None


class Main(click.Group):
    """The top-level group: turns :func:`known_failure` exceptions into one-line errors."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a known failure becomes a ``ClickException`` (exit 1).

        Args:
            ctx: Click's context.

        Returns:
            Whatever the command returns.
        """
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            message = known_failure(exc)
            if message is None:
                raise
            raise click.ClickException(message) from None
