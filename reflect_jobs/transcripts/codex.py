"""Codex rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``), SPEC-drain §2.2.

Only ``response_item`` payloads of ``type: "message"`` with role user/assistant are dialogue
(``input_text``/``output_text`` blocks). ``event_msg`` records echo the same words a second
time and are skipped, as are ``developer``/``system`` messages and the
``<environment_context>``/``<user_instructions>`` preambles Codex prepends.
"""

from __future__ import annotations

from reflect_jobs.transcripts.noise import clean_codex_text
from reflect_jobs.transcripts.records import ParsedRecord, str_or_none

_TEXT_BLOCKS = ("input_text", "output_text", "text")


def parse_record(record: object) -> ParsedRecord | None:
    """Parse one rollout record; ``None`` means "not a Codex record" (counted as malformed).

    Args:
        record: One decoded JSON line.

    Returns:
        ``None`` unless it is a dict with a string ``type`` and a dict ``payload``.
        Otherwise a :class:`ParsedRecord`, empty unless the record is a user/assistant
        ``response_item`` message: ``scan`` gets the raw user text, ``turns`` at most one
        cleaned ``(role, text, timestamp)``.
    """
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return None
    parsed = ParsedRecord()
    if record["type"] != "response_item" or payload.get("type") != "message":
        return parsed
    role = payload.get("role")
    if role not in ("user", "assistant"):
        return parsed
    content = payload.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") in _TEXT_BLOCKS
            and isinstance(block.get("text"), str)
        ]
    else:
        parts = []
    raw = "\n".join(p for p in parts if p)
    if role == "user":
        parsed.scan.append(raw)
    text = clean_codex_text(raw)
    if text:
        parsed.turns.append((role, text, str_or_none(record.get("timestamp"))))
    return parsed
