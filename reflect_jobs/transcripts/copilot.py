"""GitHub Copilot CLI ``events.jsonl`` (``{type, id, timestamp, parentId, data}``), §2.3.

Dialogue is ``user.message`` / ``assistant.message`` events with a string ``data.content``;
every other event (session, tool execution, …) is valid but carries no dialogue.
"""

from __future__ import annotations

from reflect_jobs.transcripts.noise import clean_text
from reflect_jobs.transcripts.records import ParsedRecord, str_or_none

_ROLE_OF = {"user.message": "user", "assistant.message": "assistant"}


def parse_record(record: object) -> ParsedRecord | None:
    """Parse one event; ``None`` means "not a Copilot event" (counted as malformed).

    Args:
        record: One decoded JSON line.

    Returns:
        ``None`` unless it is a dict with a string ``type`` and a dict ``data``. Otherwise a
        :class:`ParsedRecord`, empty unless it is a ``user.message``/``assistant.message``
        with string content: ``scan`` gets the raw user text, ``turns`` at most one cleaned
        ``(role, text, timestamp)``.
    """
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    data = record.get("data")
    if not isinstance(data, dict):
        return None
    parsed = ParsedRecord()
    role = _ROLE_OF.get(record["type"])
    content = data.get("content")
    if role is None or not isinstance(content, str):
        return parsed
    if role == "user":
        parsed.scan.append(content)
    text = clean_text(content)
    if text:
        parsed.turns.append((role, text, str_or_none(record.get("timestamp"))))
    return parsed
