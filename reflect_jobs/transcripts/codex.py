"""Codex rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``), SPEC-drain §2.2.

Codex records every message a person types twice: as a ``response_item`` message (the model
input, which also carries everything Codex injects in the user's name: the
``<environment_context>``/``<user_instructions>`` preambles, ``AGENTS.md``, an IDE
extension's editor context, skills) and as an ``event_msg`` ``user_message`` (only what was
typed). The event is therefore the person's speech; the ``response_item`` copy is a
*fallback*, used only for a file with no ``user_message`` event at all (see
``ParsedRecord.fallback``), so a turn is never counted twice. The agent's words are the
``response_item`` assistant messages (``event_msg`` ``agent_message`` echoes them).

Everything else is not dialogue: ``developer``/``system`` messages, ``reasoning``,
``function_call``/``custom_tool_call``/``web_search_call``/``ghost_snapshot`` items, and
``event_msg`` such as ``exec_command_end``/``patch_apply_end``/``token_count``. A
``turn_aborted`` event with reason ``interrupted`` is a person pressing Esc: it becomes the
``noise.INTERRUPTED`` line. Rollouts without ``turn_context`` records (Codex Desktop and
older builds) read the same way.

``session_meta`` says who started the session: ``originator`` ``codex_exec`` / ``source``
``exec`` is headless ``codex exec``, ``source`` ``mcp`` is Codex driven as a tool by another
program, and a ``subagent`` source or ``thread_source`` is a subagent thread.
"""

from __future__ import annotations

from reflect_jobs.transcripts.noise import INTERRUPTED, clean_codex_text
from reflect_jobs.transcripts.records import ParsedRecord, str_or_none

_TEXT_BLOCKS = ("input_text", "output_text", "text")
_HEADLESS_SOURCES = ("exec", "mcp")


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") in _TEXT_BLOCKS
            and isinstance(block.get("text"), str)
            and block["text"]
        )
    return ""


def not_interactive_reason(meta: dict) -> str:
    """Why a ``session_meta`` payload shows no person started the session, or ``""``.

    Args:
        meta: The ``payload`` of a ``session_meta`` record.

    Returns:
        A short reason for ``codex exec`` (originator ``codex_exec`` or source ``exec``),
        Codex run as an MCP tool (source ``mcp``) and subagent threads (a ``subagent``
        source or ``thread_source``); ``""`` for an interactive session (CLI, IDE, Desktop).
    """
    originator, source = meta.get("originator"), meta.get("source")
    if originator == "codex_exec":
        return "headless Codex (originator codex_exec)"
    if isinstance(source, str) and source in _HEADLESS_SOURCES:
        return f"headless Codex (source {source})"
    if (isinstance(source, dict) and "subagent" in source) or meta.get(
        "thread_source"
    ) == "subagent":
        return "Codex subagent thread"
    return ""


def parse_record(record: object) -> ParsedRecord | None:
    """Parse one rollout record; ``None`` means "not a Codex record" (counted as malformed).

    Args:
        record: One decoded JSON line.

    Returns:
        ``None`` unless it is a dict with a string ``type`` and a dict ``payload``.
        Otherwise a :class:`ParsedRecord` (see the module docstring): a ``user_message``
        event gives a primary user turn, a user ``response_item`` a fallback one, an
        assistant ``response_item`` a turn of both, an interrupted ``turn_aborted`` the
        interruption line, a ``session_meta`` its ``not_interactive`` reason; ``scan`` gets
        the raw user texts.
    """
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return None
    parsed = ParsedRecord()
    rtype, ptype = record["type"], payload.get("type")
    timestamp = str_or_none(record.get("timestamp"))
    if rtype == "session_meta":
        parsed.not_interactive = not_interactive_reason(payload)
        return parsed
    if rtype == "event_msg":
        if ptype == "user_message" and isinstance(payload.get("message"), str):
            raw = payload["message"]
            parsed.scan.append(raw)
            parsed.main = True
            kind = payload.get("kind")
            text = clean_codex_text(raw) if kind in (None, "plain") else ""
            if text:
                parsed.turns.append(("user", text, timestamp))
            parsed.fallback = []
        elif ptype == "turn_aborted" and payload.get("reason") == "interrupted":
            parsed.turns.append(("user", INTERRUPTED, timestamp))
        return parsed
    if rtype != "response_item" or ptype != "message":
        return parsed
    role = payload.get("role")
    if role not in ("user", "assistant"):
        return parsed
    raw = _text_of(payload.get("content"))
    parsed.main = True
    text = clean_codex_text(raw)
    if role == "user":
        parsed.scan.append(raw)
        parsed.fallback = [("user", text, timestamp)] if text else []
    elif text:
        parsed.turns.append((role, text, timestamp))
    return parsed
