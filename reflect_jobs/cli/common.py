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

from ..config import Settings, SettingsError, resolve
from ..harnesses import NAMES as HARNESSES

__all__ = [
    "HARNESSES",
    "ConfigError",
    "OneLineUsage",
    "Main",
    "emit",
    "get_settings",
    "known_failure",
    "quiet_libraries",
    "table",
]


class ConfigError(click.ClickException):
    """A setting is unusable: one line naming it and the fix, exit 2 (no usage text)."""

    exit_code = 2


def settings_fix(message: str) -> str:
    """The fix for a :class:`~reflect_jobs.config.SettingsError`, from where the value came.

    Args:
        message: The error's text (it names a variable, or a key ``in <config file>``).

    Returns:
        ``edit <file>`` for a value from the config file, else ``unset VAR or give it a
        valid value``.
    """
    head = message.split(" must ", 1)[0]
    if " in " in head:
        return f"edit {head.split(' in ', 1)[1]}"
    return f"unset {head.split()[0]} or give it a valid value"


_WARNED: set[str] = set()


def get_settings() -> Settings:
    """The validated settings, or exit 2 with the problem and its fix on one line.

    Warnings (a config file that is not TOML or names an unknown key, a deprecated
    variable) go to stderr, once per process.

    Returns:
        The settings from the environment over the user config file.

    Raises:
        ConfigError: A setting is invalid (exit code 2).
    """
    try:
        resolved = resolve()
    except SettingsError as exc:
        raise ConfigError(f"{exc}; fix: {settings_fix(str(exc))}") from None
    for line in resolved.warnings:
        if line not in _WARNED:
            _WARNED.add(line)
            click.secho(f"warning: {line}", fg="yellow", err=True)
    return resolved.settings


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
                damaged = damage_line(resolve().settings.db_url)
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


class OneLineUsage(click.UsageError):
    """A bad option or argument as one line with where to look, not the usage text."""

    def show(self, file: Any = None) -> None:
        """Print ``Error: <what> (see `<command> --help`)`` on stderr.

        Args:
            file: Where to print (default stderr).
        """
        where = self.ctx.command_path if self.ctx is not None else "reflect-jobs"
        click.echo(f"Error: {self.format_message()} (see `{where} --help`)", err=True, file=file)


def one_line(exc: click.UsageError) -> OneLineUsage:
    """The same usage error, printed on one line (exit 2 like every usage error).

    Args:
        exc: A usage error click raised (a bad option value, a missing argument).

    Returns:
        The error as :class:`OneLineUsage`, same message and context; its exit code is
        click's ``UsageError.exit_code`` (2), a class attribute every usage error shares.
    """
    if isinstance(exc, OneLineUsage):
        return exc
    return OneLineUsage(exc.format_message(), exc.ctx)


class OneLineGroup(click.Group):
    """A group whose usage errors (bad option values, missing arguments) are one line."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        """Parse the group's own options; a usage error becomes one line.

        Args:
            *args: As :meth:`click.Group.make_context`.
            **kwargs: As :meth:`click.Group.make_context`.

        Returns:
            The context.
        """
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a usage error below (a subcommand's options) becomes one line.

        Args:
            ctx: Click's context.

        Returns:
            Whatever the command returns.
        """
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise one_line(exc) from None


class Main(OneLineGroup):
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
