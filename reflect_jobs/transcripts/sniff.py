"""Format detection from the first records of a file.

Each harness has one unmistakable record shape, so the first *decisive* record wins; a file
whose first records are all ambiguous is read as Claude Code, the format the original drain
(and the minimal ``{"message": …}`` shim form) use.
"""

from __future__ import annotations

from collections.abc import Iterable

_CODEX_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_CLAUDE_TYPES = frozenset(
    {"user", "assistant", "summary", "system", "queue-operation", "file-history-snapshot"}
)


def record_format(record: object) -> str | None:
    """The format one record proves, or ``None`` when it proves nothing.

    Args:
        record: One decoded JSON line.

    Returns:
        ``"claude"`` for a dict ``message`` or a Claude Code record type, ``"codex"`` for a
        Codex record type with a dict ``payload``, ``"copilot"`` for a dotted type with a
        dict ``data``; ``None`` otherwise.
    """
    if not isinstance(record, dict):
        return None
    rtype = record.get("type")
    if not isinstance(rtype, str):
        rtype = None  # a list/dict "type" is hostile or broken input, never a known record
    if isinstance(record.get("message"), dict) or rtype in _CLAUDE_TYPES:
        return "claude"
    if rtype in _CODEX_TYPES and isinstance(record.get("payload"), dict):
        return "codex"
    if isinstance(rtype, str) and "." in rtype and isinstance(record.get("data"), dict):
        return "copilot"
    return None


def detect_format(first_records: Iterable[object]) -> str:
    """Return ``"claude"``, ``"codex"`` or ``"copilot"`` for the given leading records.

    Args:
        first_records: Decoded records in file order; consumed only up to the first
            decisive one.

    Returns:
        The format of the first record that proves one (:func:`record_format`), else
        ``"claude"``.
    """
    for record in first_records:
        fmt = record_format(record)
        if fmt is not None:
            return fmt
    return "claude"
