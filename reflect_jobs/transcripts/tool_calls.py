"""Tool traffic of one transcript record, condensed: calls with short arguments, errors, and
short results (seed 002's reflector step 2).

The dialogue reader drops tool traffic on purpose (a tool's "ERROR: wrong" must never trip
the learning gate). The reflection pass needs some of it back, or the model cannot tell
what a session finished: which commands ran, which failed, what the tests said. So this
module reads the same records a second way and returns *events*, never dialogue turns:

* ``call`` — a tool call: its name and its arguments cut to :data:`ARG_CHARS` characters
  (``Bash(command="pytest -q")``);
* ``error`` — a tool result the harness marked as failed, cut to :data:`ERROR_CHARS`;
* ``result`` — a successful result only when it is short (≤ :data:`SHORT_RESULT_CHARS`
  characters, e.g. ``3 passed in 0.21s``) or its last line reads like a test or build
  summary; any other output is dropped.

Every harness's shape is documented in docs/HARNESSES.md; anything of another shape gives
no event. Pure functions of one decoded record; standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: A call's arguments are cut to this many characters.
ARG_CHARS = 160
#: A failed tool's output is cut to this many characters (head and tail kept).
ERROR_CHARS = 600
#: A successful result this short is kept whole (one line).
SHORT_RESULT_CHARS = 160
#: Any text field is looked at only up to this many characters (a 50 MB error costs this).
SCAN_CHARS = 64 * 1024
#: The last line of a longer result is kept when it reads like a summary (tests, builds).
_SUMMARY = re.compile(
    r"\b(\d+ (passed|failed|errors?|skipped|tests?)|tests? (passed|failed)|"
    r"ok|FAILED|PASSED|Build (succeeded|failed)|error(s)?:|exit code \d+)\b",
    re.IGNORECASE,
)
_ARG_KEYS = ("command", "cmd", "file_path", "path", "pattern", "query", "url", "description")


@dataclass(frozen=True)
class ToolEvent:
    """One condensed piece of tool traffic: ``kind`` is ``call``, ``error`` or ``result``."""

    kind: str
    text: str


def _one_line(text: str) -> str:
    return " ".join(text[:SCAN_CHARS].split())


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(limit // 2 - 2, 1)
    return f"{text[:half]} … {text[-half:]}"


def short_args(value: object) -> str:
    """A call's arguments as one short line: the telling keys first, cut to :data:`ARG_CHARS`.

    Args:
        value: The call's input (a dict, a JSON string, or anything).

    Returns:
        ``key="value", …`` for a dict (``command``/``file_path``/… first), the text of a
        string that is not a JSON object, ``""`` otherwise.
    """
    if isinstance(value, str):
        raw = value[:SCAN_CHARS]
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            return _cut(_one_line(raw), ARG_CHARS)
        value = decoded
    if not isinstance(value, dict):
        return ""
    keys = [k for k in _ARG_KEYS if k in value] + [k for k in value if k not in _ARG_KEYS]
    parts = []
    for key in keys[:4]:
        item = value[key]
        if isinstance(item, list) and all(isinstance(x, str) for x in item[:50]):
            item = " ".join(item[:50])  # Codex's shell command: ["bash", "-lc", "pytest -q"]
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)[:200]
        parts.append(f'{key}="{_one_line(text)[:ARG_CHARS]}"')
    return _cut(", ".join(parts), ARG_CHARS)


def call_event(name: object, args: object) -> ToolEvent | None:
    """The ``call`` event of a tool named ``name`` with ``args``.

    Args:
        name: The tool's name (a non-string or blank name gives no event).
        args: Its input.

    Returns:
        ``ToolEvent("call", "Name(args)")`` or None.
    """
    if not isinstance(name, str) or not name.strip():
        return None
    return ToolEvent("call", f"{_one_line(name)[:60]}({short_args(args)})")


def result_event(text: object, *, failed: bool) -> ToolEvent | None:
    """The event a tool's output gives: an error, a short result, or nothing.

    Args:
        text: The output (non-strings give nothing).
        failed: The harness marked the call as failed.

    Returns:
        ``error`` with the output cut to :data:`ERROR_CHARS` (head and tail), ``result``
        for short output or a summary-like last line, else None (dropped).
    """
    if not isinstance(text, str) or not text.strip():
        return None
    head = text[:SCAN_CHARS]
    if failed:
        tail = text[-SCAN_CHARS // 4 :] if len(text) > SCAN_CHARS else ""
        whole = _one_line(head if not tail else head[: SCAN_CHARS // 2] + " … " + tail)
        return ToolEvent("error", _cut(whole, ERROR_CHARS))
    line = _one_line(head)
    if len(line) <= SHORT_RESULT_CHARS:
        return ToolEvent("result", line)
    lines = [ln.strip() for ln in text[-4096:].splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if last and len(last) <= SHORT_RESULT_CHARS and _SUMMARY.search(last):
        return ToolEvent("result", _one_line(last))
    return None


def _block_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and isinstance(b.get("text"), str) and b.get("type") == "text"
        )
    return ""


def claude_events(record: dict) -> list[ToolEvent]:
    """Tool traffic of a Claude Code record: ``tool_use`` and ``tool_result`` blocks.

    Args:
        record: One decoded JSON line (a subagent's sidechain record gives nothing).

    Returns:
        The events, in the record's order.
    """
    if record.get("isSidechain") is True or isinstance(record.get("agentId"), str):
        return []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    out: list[ToolEvent] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            event = call_event(block.get("name"), block.get("input"))
        elif block.get("type") == "tool_result":
            event = result_event(
                _block_text(block.get("content")), failed=block.get("is_error") is True
            )
        else:
            continue
        if event is not None:
            out.append(event)
    return out


def _codex_output(raw: object) -> tuple[str, bool]:
    """A Codex function output's text and whether it failed (exit code ≠ 0)."""
    if not isinstance(raw, str):
        if isinstance(raw, dict):
            raw = raw.get("content")
        return (raw if isinstance(raw, str) else ""), False
    try:
        decoded = json.loads(raw[:SCAN_CHARS]) if raw[:1] == "{" else None
    except (ValueError, RecursionError):
        decoded = None
    if isinstance(decoded, dict):
        meta = decoded.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        text = decoded.get("output")
        return (text if isinstance(text, str) else ""), isinstance(code, int) and code != 0
    match = re.search(r"(?:Exit code|Process exited with code):? (\d+)", raw[:512])
    return raw, bool(match and match.group(1) != "0")


def codex_events(record: dict) -> list[ToolEvent]:
    """Tool traffic of a Codex rollout record: ``function_call``/``custom_tool_call`` items
    and their outputs (the ``exec_command_end`` events repeat them and are not read).

    Args:
        record: One decoded JSON line.

    Returns:
        The events (at most one).
    """
    payload = record.get("payload")
    if record.get("type") != "response_item" or not isinstance(payload, dict):
        return []
    ptype = payload.get("type")
    if ptype == "function_call":
        event = call_event(payload.get("name"), payload.get("arguments"))
    elif ptype == "custom_tool_call":
        event = call_event(payload.get("name"), payload.get("input"))
    elif ptype in ("function_call_output", "custom_tool_call_output"):
        text, failed = _codex_output(payload.get("output"))
        event = result_event(text, failed=failed)
    else:
        return []
    return [event] if event is not None else []


def copilot_events(record: dict) -> list[ToolEvent]:
    """Tool traffic of a Copilot CLI event: ``tool.execution_start``/``_complete``.

    Args:
        record: One decoded JSON line (a subagent's event gives nothing).

    Returns:
        The events (at most one).
    """
    data = record.get("data")
    if not isinstance(data, dict) or isinstance(record.get("agentId"), str):
        return []
    rtype = record.get("type")
    if rtype == "tool.execution_start":
        event = call_event(data.get("toolName"), data.get("arguments"))
    elif rtype == "tool.execution_complete":
        result = data.get("result")
        error = data.get("error")
        if data.get("success") is False or error:
            text = error.get("message") if isinstance(error, dict) else error
            event = result_event(text if isinstance(text, str) else "tool failed", failed=True)
        else:
            content = result.get("content") if isinstance(result, dict) else result
            event = result_event(content, failed=False)
    else:
        return []
    return [event] if event is not None else []


#: The tool-traffic reader of each harness (``transcripts/<harness>.py`` reads its dialogue).
READERS = {"claude": claude_events, "codex": codex_events, "copilot": copilot_events}


def tool_events(harness: str, record: object) -> list[ToolEvent]:
    """The condensed tool traffic of one record of ``harness``'s transcript.

    Args:
        harness: ``claude``, ``codex`` or ``copilot``.
        record: One decoded JSON line (anything else gives nothing).

    Returns:
        The events, in the record's order.
    """
    reader = READERS.get(harness)
    if reader is None or not isinstance(record, dict):
        return []
    return reader(record)
