"""What of ours is installed where: hooks, MCP entries, service units, and what each carries.

``doctor`` compares the homes these point at (a hook, the service and the MCP server must
all use the home the config file names, or captures land where nobody reads them) and
``uninstall`` removes them. Read-only, and tolerant: a file we cannot parse is reported as
such, never an exception.
"""

from __future__ import annotations

import json
import os
import plistlib
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import harnesses
from .hook_paths import HOOK_MARKER, harness_hook_files
from .hooks import read_installed
from .mcp import SERVER_NAME, mcp_config_path
from .service import SERVICE_FILES, default_service_path, parse_unit

#: The variables whose value must agree everywhere (what the hook, worker and MCP use).
PATH_VARS = ("REFLECT_HOME", "GLOBAL_LEARNINGS_PATH")


@dataclass
class Installed:
    """One thing of ours: where it is, the command it runs and the variables it sets."""

    what: str  # "hooks (claude)", "MCP (codex)", "service (systemd)"
    path: Path
    #: The executable it runs (absolute), or None when it could not be read.
    command: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: The whole command line (a service unit's ``ExecStart`` / ``ProgramArguments``).
    argv: list[str] = field(default_factory=list)
    problem: str = ""


def _systemd_unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return value.replace('\\"', '"').replace("\\\\", "\\").replace("%%", "%")


def read_service(manager: str, path: Path) -> Installed:
    """The executable and environment of a rendered unit.

    Args:
        manager: ``systemd`` or ``launchd``.
        path: The unit file.

    Returns:
        What the unit runs and sets (``problem`` when it cannot be read).
    """
    item = Installed(f"service ({manager})", path)
    try:
        text = path.read_text(encoding="utf-8")
        if manager == "launchd":
            data = plistlib.loads(text.encode("utf-8"))
            args = [str(a) for a in data.get("ProgramArguments") or []]
            item.command = args[0] if args else None
            item.argv = args
            item.env = {str(k): str(v) for k, v in (data.get("EnvironmentVariables") or {}).items()}
            return item
        service = parse_unit(text).get("Service", [])
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        item.problem = f"cannot read {path}: {exc}"
        return item
    for key, value in service:
        if key == "ExecStart":
            words = shlex.split(value)
            item.command = words[0] if words else None
            item.argv = words
        elif key == "Environment":
            name, _, val = _systemd_unquote(value).partition("=")
            item.env[name] = val
    return item


def service_units() -> list[Installed]:
    """Our service unit in each manager's default place, where one exists.

    Returns:
        One entry per unit file present (systemd, launchd).
    """
    out = []
    for manager in SERVICE_FILES:
        path = default_service_path(manager)
        if path.exists():
            out.append(read_service(manager, path))
    return out


def mcp_entries(environ: Mapping[str, str] | None = None) -> list[Installed]:
    """Our MCP server's entry in each harness's MCP config, where one exists.

    Args:
        environ: The environment that locates the harness homes (default ``os.environ``).

    Returns:
        One entry per harness whose MCP file registers ``reflect-jobs``.
    """
    out = []
    for harness in harnesses.NAMES:
        path = mcp_config_path(harness, environ)
        if not path.exists():
            continue
        try:
            text = path.read_text(encoding="utf-8")
            doc = tomllib.loads(text) if harness == "codex" else json.loads(text or "{}")
            key = "mcp_servers" if harness == "codex" else "mcpServers"
            entry = (doc.get(key) or {}).get(SERVER_NAME) if isinstance(doc, dict) else None
        except (OSError, ValueError) as exc:
            out.append(Installed(f"MCP ({harness})", path, problem=f"cannot read {path}: {exc}"))
            continue
        if not isinstance(entry, dict):
            continue
        raw_env = entry.get("env")
        env = raw_env if isinstance(raw_env, dict) else {}
        out.append(
            Installed(
                f"MCP ({harness})",
                path,
                command=str(entry.get("command") or "") or None,
                env={str(k): str(v) for k, v in env.items()},
            )
        )
    return out


def hook_entries(environ: Mapping[str, str] | None = None) -> list[Installed]:
    """Our hook commands per harness settings file, with any ``VAR=value`` they set first.

    Args:
        environ: The environment that locates the harness homes (default ``os.environ``).

    Returns:
        One entry per file holding hooks of ours; ``command`` is the hook script, ``env``
        the assignments written before it (none, for what ``install`` writes).
    """
    out = []
    for harness in harnesses.NAMES:
        for path in harness_hook_files(harness, environ):
            found = read_installed(path)
            if not found:
                continue
            item = Installed(f"hooks ({harness})", path)
            for cmd in sorted({c for cmds in found.values() for c in cmds}):
                try:
                    words = shlex.split(cmd)
                except ValueError:
                    continue
                for w in words:
                    if w.endswith(HOOK_MARKER):
                        item.command = item.command or w
                        break
                    name, eq, value = w.partition("=")
                    if eq and name in PATH_VARS:
                        item.env[name] = value
            out.append(item)
    return out


def everything(environ: Mapping[str, str] | None = None) -> list[Installed]:
    """Hooks, MCP entries and service units, in that order.

    Args:
        environ: The environment that locates the harness homes (default ``os.environ``).

    Returns:
        Everything of ours found.
    """
    return [*hook_entries(environ), *mcp_entries(environ), *service_units()]


def bin_dir(command: str | None) -> str | None:
    """The directory of an installed executable (its venv's ``bin``), unresolved.

    Args:
        command: The executable's path, or None.

    Returns:
        Its directory, or None.
    """
    return os.path.dirname(command) if command else None
