"""Make outside text storable: no lone surrogates, no NUL, and bounded where a column is.

Text that reaches the ledger comes from places we do not control — a model's answer, a
hook's payload, a transcript's path — and a few values break a store outright: a lone
surrogate (``"\\ud800"``, legal in JSON, not in UTF-8) cannot be encoded for SQLite or a
note file, PostgreSQL refuses a NUL in any text, and a value longer than a ``VARCHAR(n)``
column fails the whole transaction there (SQLite would store it). Each of these used to end
the stage with an unhandled exception. Stdlib only, so any module may use it.
"""

from __future__ import annotations

import hashlib

REPLACEMENT = "\ufffd"
_HASH_CHARS = 12


def clean_text(value: str) -> str:
    """``value`` with lone surrogates replaced by U+FFFD and NUL characters removed.

    Args:
        value: Any string.

    Returns:
        A string every store and UTF-8 file accepts; ``value`` itself when it was clean.
    """
    if "\x00" in value:
        value = value.replace("\x00", "")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A surrogate *pair* written as two escapes is a real character: keep it.
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        value = "".join(REPLACEMENT if "\ud800" <= ch <= "\udfff" else ch for ch in value)
    return value


def bounded(value: str, limit: int) -> str:
    """``clean_text(value)`` cut to at most ``limit`` characters, still telling values apart.

    A value over the limit keeps its head and ends in ``~`` and 12 hex digits of the full
    value's SHA-1, so two long paths that share a prefix stay two keys (a proof per source,
    a transcript row per path) and the same long value always maps to the same key.

    Args:
        value: Any string.
        limit: The column's length (at least 16).

    Returns:
        A clean string of at most ``limit`` characters.
    """
    value = clean_text(value)
    if len(value) <= limit:
        return value
    digest = hashlib.sha1(value.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return value[: limit - _HASH_CHARS - 1] + "~" + digest
