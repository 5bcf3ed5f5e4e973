"""The working directory a transcript was recorded in, for scoping its learnings.

Claude Code writes ``cwd`` on every record, Copilot CLI on its session start event
(``data.context.cwd`` or ``data.cwd``), Codex in ``session_meta`` and ``turn_context``
payloads. The first one found wins: it is where the session started, and the repository it
names is the one its learnings are about (ARCHITECTURE §13). Only the first records are
read, line by line, so a huge transcript costs nothing extra.
"""

from __future__ import annotations

import json
import os

from reflect_jobs.fsio import open_regular

MAX_RECORDS = 200
MAX_LINE_BYTES = 1 << 20


def record_cwd(record: object) -> str | None:
    """The working directory one decoded transcript record names, if any.

    Args:
        record: One decoded JSONL record of any harness.

    Returns:
        A non-empty string from ``cwd`` (Claude Code), ``payload.cwd`` of a
        ``session_meta``/``turn_context`` record (Codex), or ``data.cwd`` /
        ``data.context.cwd`` (Copilot); else ``None``.
    """
    if not isinstance(record, dict):
        return None
    candidates: list[object] = [record.get("cwd")]
    payload = record.get("payload")
    if isinstance(payload, dict) and record.get("type") in ("session_meta", "turn_context"):
        candidates.append(payload.get("cwd"))
    data = record.get("data")
    if isinstance(data, dict):
        candidates.append(data.get("cwd"))
        context = data.get("context")
        if isinstance(context, dict):
            candidates.append(context.get("cwd"))
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def transcript_cwd(path: str | os.PathLike[str]) -> str | None:
    """The first working directory named in a transcript's first records.

    Args:
        path: The transcript file.

    Returns:
        The directory as recorded, or ``None`` (no record names one, or the file cannot be
        read: scoping then falls back to global).
    """
    try:
        with open_regular(path) as fh:
            for _ in range(MAX_RECORDS):
                raw = fh.readline(MAX_LINE_BYTES)
                if not raw:
                    return None
                if b"cwd" not in raw:
                    continue
                try:
                    found = record_cwd(json.loads(raw.decode("utf-8", errors="replace")))
                except ValueError:
                    continue
                if found:
                    return found
    except OSError:
        return None
    return None
