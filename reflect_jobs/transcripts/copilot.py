"""GitHub Copilot CLI ``events.jsonl`` (``{type, id, timestamp, parentId, data}``), §2.3.

Dialogue is ``user.message`` / ``assistant.message`` events with a string ``data.content``
(for a user message without one, its ``transformedContent`` without the
``<current_datetime>``/``<system_reminder>`` wrappers Copilot adds for the model); every
other event (session, tool execution, …) is valid but carries no dialogue. Not the person's
speech either, so dropped: events of a subagent (a top-level ``agentId``), and user messages
Copilot injects itself — a ``data.source`` other than ``user`` (skills, agents, autopilot)
or ``isAutopilotContinuation``.
"""

from __future__ import annotations

from reflect_jobs.transcripts.noise import clean_copilot_text
from reflect_jobs.transcripts.records import ParsedRecord, str_or_none

_ROLE_OF = {"user.message": "user", "assistant.message": "assistant"}


def _injected(data: dict) -> bool:
    source = data.get("source")
    return data.get("isAutopilotContinuation") is True or (source is not None and source != "user")


def parse_record(record: object) -> ParsedRecord | None:
    """Parse one event; ``None`` means "not a Copilot event" (counted as malformed).

    Args:
        record: One decoded JSON line.

    Returns:
        ``None`` unless it is a dict with a string ``type`` and a dict ``data``. Otherwise a
        :class:`ParsedRecord`, empty unless it is a ``user.message``/``assistant.message``
        of the session itself with text (see the module docstring): ``scan`` gets the raw
        user text, ``turns`` at most one cleaned ``(role, text, timestamp)``.
    """
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    data = record.get("data")
    if not isinstance(data, dict):
        return None
    parsed = ParsedRecord()
    role = _ROLE_OF.get(record["type"])
    if role is None:
        return parsed
    if isinstance(record.get("agentId"), str) or isinstance(data.get("agentId"), str):
        parsed.sidechain = True
        return parsed
    content = data.get("content")
    if not isinstance(content, str) or (role == "user" and not content.strip()):
        content = data.get("transformedContent") if role == "user" else None
    if not isinstance(content, str):
        return parsed
    parsed.main = True
    if role == "user":
        parsed.scan.append(content)
        if _injected(data):
            return parsed
    text = clean_copilot_text(content)
    if text:
        parsed.turns.append((role, text, str_or_none(record.get("timestamp"))))
    return parsed
