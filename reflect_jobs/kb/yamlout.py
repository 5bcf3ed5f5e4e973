"""A tiny, injection-proof YAML emitter for note frontmatter and sidecars.

Model output goes into these files verbatim, and the original drain broke when a value held
``---`` or a newline (SPEC-drain §9.3 #17, §10 B12). Instead of trusting a general-purpose
dumper's style choices we emit a narrow subset whose safety is easy to see:

* every top-level key is on exactly one line (lists of mappings use one flow mapping per
  ``  - {...}`` line), so no value can ever start a new key or a ``---`` line;
* every string is a double-quoted scalar with whitespace collapsed and ``\\``/``"`` and all
  non-printable characters escaped, so ``: ``, ``#``, ``&a``, ``*a`` and ``!!python/object``
  are just characters;
* only words we recognise as harmless (``lrn-foo-abc123``, ``learning``, ``high``) are bare.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence

_WS = re.compile(r"\s+")
# PyYAML's printable set, minus the YAML line breaks (\x85, \u2028, \u2029) which \s already
# collapses, and minus the BOM which some readers strip silently.
_UNSAFE = re.compile("[^\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BARE = re.compile(r"^[a-z][a-z0-9_-]*$")
# YAML 1.1 words that safe_load would turn into booleans or null.
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"})
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def clean_text(value: object) -> str:
    """``str(value)`` made encodable: lone surrogates become U+FFFD instead of crashing a write.

    Args:
        value: Any value; a string is used as is, anything else through ``str()``.

    Returns:
        The text with every lone surrogate replaced by U+FFFD.
    """
    text = value if isinstance(value, str) else str(value)
    return _SURROGATE.sub("\ufffd", text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def yaml_scalar(value: object) -> str:
    """One-line double-quoted YAML scalar for arbitrary text.

    Whitespace runs (newlines included) collapse to one space because frontmatter fields are
    one-line summaries; a multi-line value is exactly how a model could smuggle in a key.

    Args:
        value: Any value; ``None`` becomes the empty string, others go through ``str()``.

    Returns:
        The quoted scalar, stripped, with ``\\`` and ``"`` escaped and every non-printable
        character written as a ``\\x``/``\\u``/``\\U`` escape.
    """
    text = _WS.sub(" ", clean_text("" if value is None else value)).strip()
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _UNSAFE.sub(_escape_char, text) + '"'


def bare_or_quoted(value: str) -> str:
    """Emit identifiers and enum words bare (readable diffs), everything else quoted.

    Args:
        value: The string to emit.

    Returns:
        ``value`` itself when it is a lower-case word (``[a-z][a-z0-9_-]*``) that YAML would
        not read as a boolean or null, else :func:`yaml_scalar` of it.
    """
    if _BARE.match(value) and value not in _RESERVED:
        return value
    return yaml_scalar(value)


def yaml_value(value: object) -> str:
    """Flow-style YAML for a frontmatter value (never contains a line break).

    Args:
        value: ``None``, a bool, number, string, date/datetime, mapping, or sequence/set of
            these (nested); anything else is quoted through ``str()``.

    Returns:
        The YAML text: ``null``/``true``/``false``, a number (non-finite floats as
        ``null``), a bare or quoted string, an ISO date in quotes, ``{k: v, ...}`` or
        ``[...]``.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "null"
    if isinstance(value, str):
        return bare_or_quoted(value)
    if isinstance(value, _dt.datetime | _dt.date):
        return yaml_scalar(value.isoformat())
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key(k)}: {yaml_value(v)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, Sequence | set | frozenset):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    return yaml_scalar(value)


def _key(key: object) -> str:
    text = str(key)
    return text if _KEY.match(text) and text.lower() not in _RESERVED else yaml_scalar(text)


def yaml_entry(key: object, value: object) -> str:
    """``key: value`` lines; a non-empty list of mappings goes one mapping per line.

    Odd keys (from a hand-edited note) are quoted rather than rejected so a lifecycle
    rewrite never fails on a note it did not create.

    Args:
        key: The top-level key; quoted unless it is an identifier YAML reads as a string.
        value: Its value (see :func:`yaml_value`).

    Returns:
        One ``key: value`` line, or for a non-empty list of mappings a ``key:`` line followed
        by one ``  - {...}`` line per mapping (no final newline).
    """
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and value
        and all(isinstance(v, Mapping) for v in value)
    ):
        return "\n".join([f"{_key(key)}:"] + [f"  - {yaml_value(v)}" for v in value])
    return f"{_key(key)}: {yaml_value(value)}"


def yaml_block(mapping: Mapping[str, object]) -> str:
    """Render a whole frontmatter/sidecar mapping, one top-level key per line group.

    Args:
        mapping: The keys and values, emitted in their iteration order.

    Returns:
        The :func:`yaml_entry` of each item joined by newlines, without ``---`` fences or a
        final newline.
    """
    return "\n".join(yaml_entry(k, v) for k, v in mapping.items())
