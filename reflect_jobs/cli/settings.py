"""``reflect-jobs config``: every setting's effective value and where it came from.

A setting can come from three places — the default, the user config file, an environment
variable — and the worker, the hook and a shell may see different ones. This prints what
*this* process sees, one row per setting of the table (:mod:`reflect_jobs.settings_spec`),
secrets masked; ``doctor`` compares it with what the hooks, the service and the MCP entries
see.
"""

from __future__ import annotations

from typing import Any

import click

from .. import settings_spec as spec
from .common import ConfigError, emit, settings_fix, table


def _shown(value: Any) -> Any:
    """A value as JSON shows it: paths as strings, tuples as lists."""
    if isinstance(value, tuple):
        return [_shown(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str | list):
        return value
    return str(value)


def config_rows(resolved: Any, *, internal: bool = False) -> list[dict[str, Any]]:
    """One row per setting: ``{"name", "variable", "tier", "value", "source", "help"}``.

    Args:
        resolved: :class:`reflect_jobs.config.Resolved`.
        internal: Also the internal constants (tier ``internal``, source ``fixed``).

    Returns:
        The rows, user tier first, in table order; a secret that is set reads ``"***"``.
    """
    s = resolved.settings
    rows = []
    for name, var, tier, kind, _default, _shown_default, _opts, help_text in spec.SPECS:
        value = _shown(getattr(s, name))
        if kind == "secret" and value:
            value = "***"
        rows.append(
            {
                "name": name,
                "variable": var,
                "tier": tier,
                "value": value,
                "source": resolved.sources[name],
                "help": help_text,
            }
        )
    if internal:
        for name, (value, why) in spec.INTERNAL.items():
            rows.append(
                {
                    "name": name,
                    "variable": None,
                    "tier": "internal",
                    "value": value,
                    "source": "fixed",
                    "help": why,
                }
            )
    return rows


@click.command("config")
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="Also the internal constants.")
def config(as_json: bool, show_all: bool) -> None:
    """Every setting's value and its source: default, environment or config file.

    \f
    The config file is ``$XDG_CONFIG_HOME/reflect-jobs/config.toml`` (``install`` writes
    it); an environment variable overrides it. ``--json`` prints ``{"file", "exists",
    "settings": [{"name", "variable", "tier", "value", "source", "help"}], "warnings"}``.

    Args:
        as_json: Print JSON.
        show_all: Add the internal constants (no variable; tier ``internal``).

    Raises:
        ConfigError: A setting is invalid (exit 2).
    """
    from ..config import SettingsError, resolve

    try:
        resolved = resolve()
    except SettingsError as exc:
        raise ConfigError(f"{exc}; fix: {settings_fix(str(exc))}") from None
    rows = config_rows(resolved, internal=show_all)
    if as_json:
        emit(
            {
                "file": resolved.config_path,
                "exists": resolved.config_exists,
                "settings": rows,
                "warnings": list(resolved.warnings),
            }
        )
        return
    state = "" if resolved.config_exists else " (not found: defaults and environment only)"
    click.echo(f"config file: {resolved.config_path}{state}")
    cells = []
    for r in rows:
        value = r["value"]
        text = ",".join(map(str, value)) if isinstance(value, list) else value
        if text is True or text is False:
            text = str(text).lower()
        cells.append([r["name"], r["variable"] or "(file only)", text, r["source"], r["tier"]])
    click.echo(table(cells, ["setting", "variable", "value", "source", "tier"]))
    for w in resolved.warnings:
        click.secho(f"warning: {w}", fg="yellow", err=True)


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (config,)
