"""Read notes and sidecars back, strictly.

The original split frontmatter on the first two ``---`` substrings anywhere and exited 0 on a
bad note (SPEC-drain §7.2, §10 B12). Here the fences are whole lines, YAML goes through
``safe_load`` only (no ``!!python/object``), and every failure is a :class:`NoteError` so a
writer can never count an unreadable note as written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..lifecycle import DEFAULT_CAUSAL_TYPE

REQUIRED_KEYS = ("id", "title", "category", "key_insight")
#: The largest note or sidecar file read (a larger one is unreadable, not read in part).
MAX_NOTE_BYTES = 1024 * 1024


class NoteError(Exception):
    """A note or sidecar that does not parse, or lacks a required key."""


@dataclass
class Note:
    """A parsed note. ``path`` is None when it was parsed from text."""

    id: str
    frontmatter: dict[str, Any]
    body: str
    path: Path | None


def split_frontmatter(text: str) -> tuple[str, str]:
    """Return ``(frontmatter_yaml, body)``.

    The first line must be exactly ``---`` and the frontmatter ends at the next line that is
    exactly ``---`` (trailing spaces and ``\\r`` tolerated), so a ``---`` inside a value or in
    the body can never move the boundary.

    Args:
        text: The whole note; a leading BOM is ignored.

    Returns:
        The frontmatter's YAML text (the lines between the fences, line ends kept) and the
        body after the closing fence, stripped of surrounding whitespace.

    Raises:
        NoteError: The first line is not ``---``, or no closing ``---`` line follows.
    """
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise NoteError("note does not start with a '---' frontmatter line")
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :]).strip()
    raise NoteError("frontmatter has no closing '---' line")


def _read(path: Path) -> str:
    """A note or sidecar file's text: a regular file, not a link, at most
    :data:`MAX_NOTE_BYTES` (:func:`reflect_jobs.fsio.read_regular`).

    A note in a synced ``documents/`` may be a symbolic link to a private file; reading it
    would put that file's text in an index, a YAML error message or an MCP answer.
    """
    from ..fsio import read_regular

    try:
        return read_regular(path, max_bytes=MAX_NOTE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NoteError(f"{path}: unreadable: {exc}") from exc


def _safe_yaml(text: str, what: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NoteError(f"{what}: invalid YAML: {exc}") from exc


def parse_note(path_or_text: str | os.PathLike[str]) -> Note:
    """Parse a note from a path (``os.PathLike``) or from its text (``str``).

    A ``str`` is always text, never a path: guessing would make a note body that happens to
    name an existing file read that file instead.

    Args:
        path_or_text: A path to read (UTF-8), or the note's text itself.

    Returns:
        The note: its ``id``, the frontmatter mapping as YAML loaded it, the stripped body,
        and the path (``None`` when parsed from text).

    Raises:
        NoteError: The file is unreadable, the fences are wrong, the YAML is invalid or not
            a mapping, or a required key (``id``, ``title``, ``category``, ``key_insight``)
            is missing or not a string, or ``id``/``title`` is blank.
    """
    path: Path | None = None
    if isinstance(path_or_text, str):
        text = path_or_text
    else:
        path = Path(path_or_text)
        text = _read(path)
    where = str(path) if path else "note"
    raw_fm, body = split_frontmatter(text)
    fm = _safe_yaml(raw_fm, where)
    if not isinstance(fm, dict):
        raise NoteError(f"{where}: frontmatter is not a mapping")
    missing = [k for k in REQUIRED_KEYS if not isinstance(fm.get(k), str)]
    if missing or not fm["id"].strip() or not fm["title"].strip():
        raise NoteError(f"{where}: missing or empty required key(s) {missing or ['id/title']}")
    return Note(id=fm["id"], frontmatter=fm, body=body, path=path)


def _mapping_list(data: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise NoteError(f"{where}: {key} must be a list of mappings")
    return value


def normalize_sidecar(data: Any, where: str = "sidecar") -> dict[str, Any]:
    """Validate a sidecar mapping and fill its defaults, as the original loader did (SPEC-drain §7.4).

    The defaults are entity type ``concept``, relation type ``relates_to``, strength 5 and
    descriptions ``""``; keys other than the four returned are dropped.

    Args:
        data: The loaded YAML (anything; only a mapping is accepted).
        where: What to name in error messages (usually the sidecar's path).

    Returns:
        ``{"document_id", "extracted_at", "entities", "relationships"}``, with the two
        strings defaulting to ``""`` and every entity/relationship filled as above.

    Raises:
        NoteError: ``data`` is not a mapping, ``entities``/``relationships`` is not a list of
            mappings, an entity has no name, a relationship lacks a source or target, or a
            strength is not a number.
    """
    if not isinstance(data, dict):
        raise NoteError(f"{where}: sidecar is not a mapping")
    entities = []
    for ent in _mapping_list(data, "entities", where):
        name = ent.get("name")
        if not isinstance(name, str) or not name.strip():
            raise NoteError(f"{where}: entity without a name")
        entities.append(
            {
                "name": name,
                "type": str(ent.get("type") or "concept"),
                "description": str(ent.get("description") or ""),
            }
        )
    relationships = []
    for rel in _mapping_list(data, "relationships", where):
        source, target = rel.get("source"), rel.get("target")
        if not isinstance(source, str) or not isinstance(target, str) or not source or not target:
            raise NoteError(f"{where}: relationship without source/target")
        strength = rel.get("strength", 5)
        if isinstance(strength, bool) or not isinstance(strength, int | float):
            raise NoteError(f"{where}: relationship strength {strength!r} is not a number")
        relationships.append(
            {
                "source": source,
                "target": target,
                "type": str(rel.get("type") or DEFAULT_CAUSAL_TYPE),
                "description": str(rel.get("description") or ""),
                "strength": strength,
            }
        )
    return {
        "document_id": str(data.get("document_id") or ""),
        "extracted_at": str(data.get("extracted_at") or ""),
        "entities": entities,
        "relationships": relationships,
    }


def load_sidecar(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and normalise ``<id>.entities.yaml``; anything malformed is a :class:`NoteError`.

    Args:
        path: The sidecar file (UTF-8 YAML).

    Returns:
        The sidecar as :func:`normalize_sidecar` returns it.

    Raises:
        NoteError: The file is unreadable, not valid YAML, or not a valid sidecar.
    """
    path = Path(path)
    text = _read(path)
    return normalize_sidecar(_safe_yaml(text, str(path)), str(path))
