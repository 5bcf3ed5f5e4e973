"""Record builders in the three harnesses' real shapes, shared by the transcript tests."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, records: list[object]) -> Path:
    """Write ``records`` one JSON object a line (UTF-8) and return ``path``."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def cc_user(content: object, **extra: object) -> dict:
    """A Claude Code user record."""
    return {"type": "user", "message": {"role": "user", "content": content}, **extra}


def cc_assistant(text: str, **extra: object) -> dict:
    """A Claude Code assistant record with one text block."""
    return {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        **extra,
    }


def cc_tool_result(text: str, **extra: object) -> dict:
    """A Claude Code user record carrying one (error) tool result."""
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": text, "is_error": True}
    return cc_user([block], **extra)


def cx(rtype: str, payload: dict) -> dict:
    """A Codex rollout record."""
    return {"timestamp": "2026-07-01T10:00:00Z", "type": rtype, "payload": payload}


def cx_meta(**payload: object) -> dict:
    """A Codex ``session_meta`` record."""
    return cx("session_meta", {"id": "s", "cwd": "/repo", "cli_version": "0.135.0", **payload})


def cx_msg(role: str, text: str) -> dict:
    """A Codex ``response_item`` message."""
    block = "output_text" if role == "assistant" else "input_text"
    return cx(
        "response_item",
        {"type": "message", "role": role, "content": [{"type": block, "text": text}]},
    )


def cx_typed(text: str) -> list[dict]:
    """What Codex records for one typed message: the model input and the event."""
    return [cx_msg("user", text), cx("event_msg", {"type": "user_message", "message": text})]


def cp(etype: str, data: dict, **extra: object) -> dict:
    """A Copilot CLI event."""
    return {"type": etype, "id": "e", "timestamp": "2026-07-01T10:00:00Z", "data": data, **extra}
