"""``install`` records what it was run with in the user config file.

The hook runs with the harness's environment, the worker with the service manager's; neither
has the shell's ``REFLECT_HOME``. So ``install hooks`` and ``install service`` write the
settings every process must share — home, KB path, writer, model, per-prompt recall, the
store URLs when they are not the home's defaults, the ignored repositories (kept as they
are) — to ``$XDG_CONFIG_HOME/reflect-jobs/config.toml``, which every entry point reads
(:mod:`reflect_jobs.userconfig`). A secret (the API key) is never written for the user.

The file is edited as text (``userconfig.updated_text``): comments and keys a person added
stay; the result is checked with ``tomllib`` before it replaces the old one, atomically,
0600 in a 0700 directory.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..config import Resolved
from ..fsio import atomic_write
from ..userconfig import config_path, updated_text


@dataclass(frozen=True)
class ConfigWrite:
    """What :func:`record_install` did."""

    path: Path
    changed: bool
    keys: tuple[str, ...]


def install_values(resolved: Resolved) -> dict[str, object | None]:
    """The settings ``install`` records, from the installing process's effective settings.

    Args:
        resolved: The settings with their sources.

    Returns:
        Setting name → value; ``None`` removes a key (a store URL back at its default).
    """
    s = resolved.settings
    values: dict[str, object | None] = {
        "home": str(s.home),
        "kb_path": str(s.kb_path),
        "writer_backend": s.writer_backend,
        "model": s.model,
        "recall_on_prompt": s.recall_on_prompt,
    }
    for name in ("db_url", "queue_url", "openai_base_url"):
        values[name] = getattr(s, name) if resolved.sources[name] != "default" else None
    return values


def record_install(
    resolved: Resolved, environ: dict[str, str] | None = None, *, dry_run: bool = False
) -> ConfigWrite:
    """Write :func:`install_values` into the config file (only when something changes).

    Args:
        resolved: The installing process's settings with their sources.
        environ: Where ``XDG_CONFIG_HOME``/``HOME`` are read (default ``os.environ``).
        dry_run: Decide, write nothing.

    Returns:
        The file, whether it changed, and the keys written.

    Raises:
        OSError: The file or its directory could not be written.
        ValueError: The existing file is not TOML (it is left alone; the message names it).
    """
    values = install_values(resolved)
    if "ignore" not in read_config(environ):  # `reflect-jobs ignore`'s list stays as it is
        values["ignore"] = []
    return write_config(values, environ, dry_run=dry_run)


def read_config(environ: dict[str, str] | None = None) -> dict[str, object]:
    """The config file's document as ``tomllib`` reads it (``{}`` when there is none).

    Args:
        environ: Where ``XDG_CONFIG_HOME``/``HOME`` are read (default ``os.environ``).

    Returns:
        The top-level table.

    Raises:
        ValueError: The file is not TOML (the message names it).
        OSError: It cannot be read.
    """
    path = Path(config_path(environ))
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        return tomllib.loads(old)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path} is not valid TOML ({exc}); fix it, then re-run") from None


def write_config(
    values: dict[str, object | None],
    environ: dict[str, str] | None = None,
    *,
    dry_run: bool = False,
) -> ConfigWrite:
    """Set (``None``: remove) keys of the config file, keeping everything else as written.

    The one writer of the file: ``install`` records what it ran with, ``ignore`` and
    ``unignore`` edit the ``ignore`` list.

    Args:
        values: Setting name → value.
        environ: Where ``XDG_CONFIG_HOME``/``HOME`` are read (default ``os.environ``).
        dry_run: Decide, write nothing.

    Returns:
        The file, whether it changed, and the keys written.

    Raises:
        OSError: The file or its directory could not be written.
        ValueError: The existing file is not TOML (it is left alone; the message names it).
    """
    read_config(environ)  # refuse to edit a file that is not TOML
    path = Path(config_path(environ))
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    new = updated_text(old, values)
    tomllib.loads(new)  # our own text: a failure here is a bug, not the user's file
    keys = tuple(k for k, v in values.items() if v is not None)
    if new == old:
        return ConfigWrite(path, False, keys)
    if not dry_run:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path.parent, 0o700)
        atomic_write(path, new, mode=0o600)
    return ConfigWrite(path, True, keys)
