"""Editing a JSON settings file that belongs to someone else, without making a mess of it.

``~/.claude/settings.json`` and friends hold the user's other settings and other tools'
hooks. A rewrite that reflows the file, changes its indent or its final newline turns a
one-entry change into a diff nobody can review, so the new text is serialised in the style
of the old (:func:`dump_like`). A file we cannot read or parse is reported and never touched
(:class:`SettingsFileError`). Before any change a ``<file>.bak-<UTC timestamp>`` copy is
made; the write is atomic (:func:`reflect_jobs.fsio.atomic_write`) and goes through a symlink
to its target, because dotfile managers symlink these files and a link replaced by a regular
file silently stops being managed.

Nothing here knows what a hook is: :mod:`.hooks` decides *what* the document becomes, this
module reads, diffs, backs up and writes it.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..fsio import atomic_write

#: A settings file we create is private: it may come to hold tokens or paths of the user's.
NEW_FILE_MODE = 0o600


class SettingsFileError(Exception):
    """A settings file cannot be parsed or has an unexpected shape; it was left untouched."""


def parse_json(text: str, path: Path | str) -> Any:
    """Parse a settings file; an empty file counts as ``{}``.

    Args:
        text: The file's content.
        path: The file's name, for the error message only.

    Returns:
        The parsed document.

    Raises:
        SettingsFileError: ``text`` is not valid JSON (the message names line and column).
    """
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); left untouched"
        ) from None


def guess_indent(text: str) -> int | str | None:
    """The indent unit of a JSON file: the whitespace before its first indented line.

    Args:
        text: The file's content.

    Returns:
        ``None`` when the file is one line (compact JSON stays compact), ``"\\t"`` for a
        tab-indented file, else the number of spaces; a file we create, or one with no
        indented line, gets 2 spaces — what Claude Code itself writes.
    """
    body = text.strip()
    if body and "\n" not in body:
        return None
    for line in body.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            ws = line[: len(line) - len(stripped)]
            return "\t" if ws.startswith("\t") else len(ws)
    return 2


def dump_like(doc: Any, original: str) -> str:
    """Serialise ``doc`` in the style of ``original`` (indent, separators, final newline).

    Args:
        doc: The document to write.
        original: The text it replaces (``""`` for a new file).

    Returns:
        The JSON text, non-ASCII characters kept as they are.
    """
    indent = guess_indent(original)
    if indent is None:
        compact = '": ' not in original and '", ' not in original
        seps = (",", ":") if compact else (", ", ": ")
        text = json.dumps(doc, ensure_ascii=False, separators=seps)
    else:
        text = json.dumps(doc, ensure_ascii=False, indent=indent)
    newline = original.endswith("\n") or not original.strip()
    return text + ("\n" if newline else "")


def backup_path(path: Path, now: datetime | None = None) -> Path:
    """``<file>.bak-<UTC timestamp>``, with a counter if one already exists for this second.

    Args:
        path: The file about to be changed.
        now: The time to stamp (tests pin it); default now.

    Returns:
        A sibling path that does not exist yet.
    """
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return candidate


@dataclass(frozen=True)
class SettingsText:
    """A settings file as read: the name the user gave, where writes go, what it held."""

    path: Path
    target: Path
    exists: bool
    text: str


def read_settings(path: Path) -> SettingsText:
    """Read a settings file, following a symlink to the file it points at.

    Args:
        path: The settings file as named by the user (it may be absent, or a symlink).

    Returns:
        The file's text (``""`` when absent) and the real file to write.

    Raises:
        SettingsFileError: The file exists but cannot be read or is not UTF-8.
    """
    # Write through a symlink to its target, so a dotfiles-managed link stays a link.
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    exists = target.exists()
    try:
        text = target.read_text(encoding="utf-8") if exists else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path}: cannot read ({exc}); left untouched") from None
    return SettingsText(path, target, exists, text)


def settings_diff(current: SettingsText, new_text: str, *, delete: bool = False) -> str:
    """A unified diff of the edit, as ``--dry-run`` shows it.

    Args:
        current: The file as read.
        new_text: What it would hold.
        delete: The file would be removed instead (shown as ``+++ /dev/null``).

    Returns:
        The diff text (empty when nothing changes).
    """
    return "".join(
        difflib.unified_diff(
            current.text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=str(current.path) if current.exists else "/dev/null",
            tofile="/dev/null" if delete else str(current.path),
        )
    )


def replace_settings(
    current: SettingsText, new_text: str | None, *, now: datetime | None = None
) -> Path | None:
    """Back the file up, then write ``new_text`` atomically (or delete it when ``None``).

    A replaced file keeps its mode; a new one is created 0600 (:data:`NEW_FILE_MODE`) in a
    directory made as needed (Copilot's ``hooks/`` may not exist yet).

    Args:
        current: The file as read by :func:`read_settings`.
        new_text: The new content, or ``None`` to remove the file.
        now: The backup's timestamp (tests pin it).

    Returns:
        The backup's path, or ``None`` when the file did not exist before.

    Raises:
        OSError: The backup, the write or the removal failed.
    """
    target = current.target
    backup = None
    if current.exists:
        backup = backup_path(target, now)
        shutil.copy2(target, backup)
    if new_text is None:
        target.unlink()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, new_text, mode=None if current.exists else NEW_FILE_MODE)
    return backup
