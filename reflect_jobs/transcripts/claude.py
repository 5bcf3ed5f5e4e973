"""Claude Code session JSONL (``~/.claude/projects/**/<session>.jsonl``), SPEC-drain §2.1.

Kept: ``user``/``assistant`` records (or the shim's untyped ``{"message": …}``) whose dict
``message`` has role user/assistant; string content whole, list content only its ``text``
blocks. Dropped, because they are not what anyone *said*: ``tool_use``/``tool_result`` (tool
output such as "ERROR: wrong" must never trip the gate), ``thinking``, ``image``; ``isMeta``
records (hook feedback and caveats the harness injects as user messages), the
``isCompactSummary`` record a compacted session continues from, ``isSidechain`` records (a
subagent's dialogue, inlined in older sessions' files), and every other record type
(``mode``, ``permission-mode``, ``ai-title``, ``last-prompt``, ``cost-state``, ``system``
such as ``stop_hook_summary``/``turn_duration``, ``progress`` such as
``hook_progress``/``agent_progress``, ``queue-operation``, ``attachment``…). Machine blocks
inside text go through ``noise.clean_text``.

Two exceptions keep words from a tool result: a person rejecting a tool call (the rejection
and its typed reason, see ``noise.rejection_feedback``) — that is feedback, not tool output.

A record also tells the reader whether a person was there at all: ``entrypoint``
``sdk-cli``/``sdk-py``/``sdk-ts`` is headless ``claude -p`` or the Agent SDK, and a first
user message that is Claude Code's compaction prompt is a compaction agent
(``agent-acompact-*``); a file whose dialogue is all ``isSidechain``/``agentId`` is a
subagent's (the reader decides that one).
"""

from __future__ import annotations

from reflect_jobs.transcripts.noise import clean_text, is_injected_user_text, rejection_feedback
from reflect_jobs.transcripts.records import ParsedRecord, str_or_none

_ROLES = ("user", "assistant")
_DIALOGUE_TYPES = ("user", "assistant")
#: ``entrypoint`` values of sessions no person typed into (``claude -p``, the Agent SDKs).
HEADLESS_ENTRYPOINTS = ("sdk-cli", "sdk-py", "sdk-ts")
# How Claude Code's compaction request opens (upstream BASE_COMPACT_PROMPT and the
# "TEXT ONLY" preamble it is sent with).
_COMPACT_PROMPT_STARTS = (
    "your task is to create a detailed summary of the",
    "critical: respond with text only",
)


def _texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
    return []


def _tool_result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(_texts(content))


def _rejections(content: object) -> list[str]:
    if not isinstance(content, list):
        return []
    out = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            feedback = rejection_feedback(_tool_result_text(block))
            if feedback:
                out.append(feedback)
    return out


def is_compaction_prompt(text: str) -> bool:
    """Whether a user text is Claude Code's request to summarise a conversation.

    Args:
        text: The raw text of a session's first user message.

    Returns:
        True when it opens (after blanks) the way the compaction prompt does; the phrase
        anywhere else in a message is a person's words.
    """
    return text.lstrip()[:80].lower().startswith(_COMPACT_PROMPT_STARTS)


def parse_record(record: object) -> ParsedRecord | None:
    """Parse one record; ``None`` means "not a Claude Code record" (counted as malformed).

    Args:
        record: One decoded JSON line.

    Returns:
        ``None`` for a non-dict, or a dict with neither a ``message`` dict nor a string
        ``type``. Otherwise a :class:`ParsedRecord`, empty for valid records without
        dialogue (see the module docstring): ``scan`` gets each raw user text and
        ``queue-operation`` content, ``turns`` at most one ``(role, text, timestamp)``,
        ``not_interactive`` a reason for a headless entrypoint, ``sidechain``/``main`` which
        dialogue the record is.
    """
    if not isinstance(record, dict):
        return None
    message = record.get("message")
    rtype = record.get("type")
    parsed = ParsedRecord()
    if not isinstance(message, dict):
        if not isinstance(rtype, str):
            return None
        if rtype == "queue-operation" and isinstance(record.get("content"), str):
            parsed.scan.append(record["content"])
        return parsed  # summary, snapshot, queue-operation, mode…: valid, no dialogue
    if isinstance(rtype, str) and rtype not in _DIALOGUE_TYPES:
        return parsed  # a system/progress/attachment record carrying a message: not dialogue
    role = message.get("role")
    if role not in _ROLES:
        return parsed
    entrypoint = record.get("entrypoint")
    if isinstance(entrypoint, str) and entrypoint in HEADLESS_ENTRYPOINTS:
        parsed.not_interactive = f"headless Claude Code (entrypoint {entrypoint})"
    content = message.get("content")
    texts = _texts(content)
    if role == "user" and texts and is_compaction_prompt(texts[0]):
        parsed.not_interactive = "compaction agent (Claude Code's summary request)"
    if record.get("isSidechain") is True or isinstance(record.get("agentId"), str):
        parsed.sidechain = True
        return parsed  # a subagent's dialogue is not the person's session
    parsed.main = True
    if role == "user":
        parsed.scan.extend(texts)
    if record.get("isMeta") or record.get("isCompactSummary"):
        return parsed
    if role == "user":
        texts = [t for t in texts if not is_injected_user_text(t)] + _rejections(content)
    text = clean_text("\n".join(p for p in texts if p))
    if text:
        parsed.turns.append((role, text, str_or_none(record.get("timestamp"))))
    return parsed
