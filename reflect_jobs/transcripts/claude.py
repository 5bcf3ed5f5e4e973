"""Claude Code session JSONL (``~/.claude/projects/**/<session>.jsonl``), SPEC-drain §2.1.

Kept: records with a dict ``message`` whose role is user/assistant; string content whole, list
content only its ``text`` blocks. Dropped, because they are not what anyone *said*:
``tool_use``/``tool_result`` (tool output such as "ERROR: wrong" must never trip the gate),
``thinking``, ``image``, and ``isMeta`` records (hook feedback and caveats the harness
injects as user messages). Machine blocks inside text go through ``noise.clean_text``.
"""

from __future__ import annotations

import json

from reflect_jobs.transcripts.noise import clean_text
from reflect_jobs.transcripts.records import ParsedRecord, str_or_none

_ROLES = ("user", "assistant")


def parse_record(record: object) -> ParsedRecord | None:
    """Parse one record; ``None`` means "not a Claude Code record" (counted as malformed).

    Args:
        record: One decoded JSON line.

    Returns:
        ``None`` for a non-dict, or a dict with neither a ``message`` dict nor a string
        ``type``. Otherwise a :class:`ParsedRecord`, empty for valid records without
        dialogue (summaries, snapshots, tool traffic, ``isMeta``): ``scan`` gets user
        content (a list as its JSON) and ``queue-operation`` content, ``turns`` at most one
        ``(role, text, timestamp)``.
    """
    if not isinstance(record, dict):
        return None
    message = record.get("message")
    parsed = ParsedRecord()
    if not isinstance(message, dict):
        if not isinstance(record.get("type"), str):
            return None
        if record.get("type") == "queue-operation" and isinstance(record.get("content"), str):
            parsed.scan.append(record["content"])
        return parsed  # summary, snapshot, queue-operation…: valid, no dialogue
    role = message.get("role")
    if role not in _ROLES:
        return parsed
    content = message.get("content")
    if role == "user":
        if isinstance(content, str):
            parsed.scan.append(content)
        elif isinstance(content, list):
            parsed.scan.append(json.dumps(content))
    if record.get("isMeta"):
        return parsed
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
    else:
        parts = []
    text = clean_text("\n".join(p for p in parts if p))
    if text:
        parsed.turns.append((role, text, str_or_none(record.get("timestamp"))))
    return parsed
