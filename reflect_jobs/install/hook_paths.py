"""Where each harness keeps its hooks, and the command our entries run.

Split from :mod:`.hooks` (the merge itself): these are the lookups ``install``, ``doctor``
and the MCP registration share — a harness's home directory and settings file, whether it
is installed at all, the ``reflect-jobs-hook`` script beside this interpreter and the
command line an entry runs for one event.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from .. import harnesses

#: What our entries' commands contain, and the hook script's name.
HOOK_MARKER = "reflect-jobs-hook"


def harness_home(harness: str, environ: Mapping[str, str] | None = None) -> Path:
    """The harness's config directory, honouring the variables each harness itself reads.

    Args:
        harness: One of :data:`reflect_jobs.harnesses.NAMES`.
        environ: The environment to read (default ``os.environ``).

    Returns:
        ``$CLAUDE_CONFIG_DIR`` / ``$CODEX_HOME`` / ``$COPILOT_HOME``, else ``~/.<harness>``
        (:func:`reflect_jobs.harnesses.home_of`, which the hook uses too).
    """
    return Path(harnesses.home_of(harnesses.get(harness), environ))


def default_settings_path(harness: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``install hooks`` writes by default.

    Copilot CLI loads every ``*.json`` in its user hooks directory, so we get a file of our own
    there instead of editing a shared one (its ``config.json`` is rewritten by the CLI itself,
    which drops a ``hooks`` key — github/copilot-cli#3403).

    Args:
        harness: One of :data:`reflect_jobs.harnesses.NAMES`.
        environ: The environment to read (default ``os.environ``).

    Returns:
        The user-level hooks file of that harness.
    """
    return harness_home(harness, environ) / harnesses.get(harness).settings_file


def harness_present(harness: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The settings file showing the harness is set up here, or None (doctor skips it).

    Args:
        harness: One of :data:`reflect_jobs.harnesses.NAMES`.
        environ: The environment to read (default ``os.environ``).

    Returns:
        The first marker file that exists, else ``None``.
    """
    home = harness_home(harness, environ)
    markers = [home / m for m in harnesses.get(harness).present_markers]
    return next((m for m in markers if m.exists()), None)


def hook_script() -> Path:
    """The installed ``reflect-jobs-hook`` next to this interpreter (it may not exist).

    ``sys.executable`` is deliberately not resolved: in a venv it is a symlink to the system
    Python, and the script lives next to the link, not next to its target.

    Returns:
        ``<directory of sys.executable>/reflect-jobs-hook``, made absolute.
    """
    return Path(os.path.abspath(sys.executable)).parent / HOOK_MARKER


def hook_command(harness: str, script: Path | None = None) -> str:
    """The shell command a harness runs, less the event: absolute path and the harness.

    :func:`merge_hooks` appends ``--event NAME`` per event (:func:`event_command`).

    Args:
        harness: The harness argument the hook is run with.
        script: The hook script (default :func:`hook_script`).

    Returns:
        The command line.
    """
    return f"{shlex.quote(str(script or hook_script()))} {harness}"


def event_command(command: str, event: str) -> str:
    """The command of our entry on one event: ``command --event EVENT``.

    Copilot CLI's camelCase payloads carry no event name, so the installed command names its
    event; every harness gets the same form, so each capture records the event that fired.

    Args:
        command: The base command (:func:`hook_command`).
        event: The event's name as the harness spells it.

    Returns:
        The command line.
    """
    return f"{command} --event {shlex.quote(event)}"


def harness_hook_files(harness: str, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every file the harness loads user-level hooks from (Copilot: all ``hooks/*.json``).

    Args:
        harness: One of :data:`reflect_jobs.harnesses.NAMES`.
        environ: The environment to read (default ``os.environ``).

    Returns:
        The existing files, sorted.
    """
    pattern = harnesses.get(harness).hook_files_glob
    if pattern:
        return sorted(harness_home(harness, environ).glob(pattern))
    p = default_settings_path(harness, environ)
    return [p] if p.exists() else []
