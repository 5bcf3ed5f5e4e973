"""``install hooks --harness claude --statusline``: our segment as Claude Code's ``statusLine``.

Claude Code has one ``statusLine`` command per settings file. When none is set we set ours
(``<venv>/bin/reflect-jobs statusline``); when the person already has one we never replace
it: the answer says how to compose the two (a line of shell that feeds the same JSON to
both). Uninstalling removes ``statusLine`` only when it is ours. The file discipline is the
hooks' (:mod:`.jsonfile`: parse or refuse, back up first, write atomically).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .jsonfile import (
    SettingsFileError,
    dump_like,
    parse_json,
    read_settings,
    replace_settings,
    settings_diff,
)

#: What our ``statusLine`` command contains.
MARKER = "reflect-jobs statusline"


def statusline_command() -> str:
    """The command our ``statusLine`` runs: ``reflect-jobs statusline`` beside this Python.

    Returns:
        The absolute, shell-quoted script path plus ``statusline``.
    """
    script = Path(os.path.abspath(sys.executable)).parent / "reflect-jobs"
    return f"{shlex.quote(str(script))} statusline"


def is_ours(entry: Any) -> bool:
    """Whether a ``statusLine`` value is the one we set.

    Args:
        entry: The settings' ``statusLine`` value.

    Returns:
        True for a command entry whose command runs ``reflect-jobs statusline`` alone.
    """
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    return isinstance(command, str) and command.rstrip().endswith(MARKER) and "|" not in command


def compose_hint(existing: Any, ours: str) -> str:
    """How to show both an existing status line and ours (printed, never applied).

    Args:
        existing: The settings' current ``statusLine`` value.
        ours: :func:`statusline_command`.

    Returns:
        A sentence and a ``statusLine`` command that runs both on the same stdin.
    """
    theirs = existing.get("command") if isinstance(existing, dict) else None
    if not isinstance(theirs, str) or not theirs.strip():
        return f"statusLine is already set (not a command); to add ours, run: {ours}"
    both = (
        f'in=$(cat); a=$(printf %s "$in" | {theirs}); '
        f'b=$(printf %s "$in" | {ours}); printf "%s%s%s" "$a" "${{b:+ · }}" "$b"'
    )
    return (
        "statusLine is already set and was left alone. To show both, set its command to:\n"
        f"  sh -c {shlex.quote(both)}"
    )


@dataclass
class StatusLineChange:
    """What :func:`apply_statusline` did: ``set``, ``removed``, ``unchanged``, ``kept``
    (someone else's: see ``hint``) or ``absent``; the backup and the diff."""

    action: str
    path: Path
    backup: Path | None = None
    diff: str = ""
    hint: str = ""


def apply_statusline(
    path: Path, *, uninstall: bool = False, dry_run: bool = False
) -> StatusLineChange:
    """Set (or remove) our ``statusLine`` in a Claude Code settings file.

    Args:
        path: The settings file (absent, a file, or a symlink to one).
        uninstall: Remove ours (someone else's is never touched).
        dry_run: Compute the change and its diff; write nothing.

    Returns:
        The change.

    Raises:
        SettingsFileError: The file cannot be read or parsed, or is not a JSON object.
        OSError: The backup or the write failed.
    """
    current = read_settings(path)
    doc = parse_json(current.text, path) if current.exists else {}
    if not isinstance(doc, dict):
        raise SettingsFileError(f"{path}: not a JSON object; left untouched")
    entry = doc.get("statusLine")
    ours = statusline_command()
    if uninstall:
        if not is_ours(entry):
            return StatusLineChange("absent" if entry is None else "kept", path)
        del doc["statusLine"]
        action = "removed"
    elif entry is None:
        doc["statusLine"] = {"type": "command", "command": ours, "padding": 0}
        action = "set"
    elif is_ours(entry):
        return StatusLineChange("unchanged", path)
    else:
        return StatusLineChange("kept", path, hint=compose_hint(entry, ours))
    new_text = dump_like(doc, current.text)
    change = StatusLineChange(action, path, diff=settings_diff(current, new_text))
    if not dry_run:
        change.backup = replace_settings(current, new_text)
    return change
