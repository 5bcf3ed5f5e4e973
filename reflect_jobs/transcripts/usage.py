"""How full a session's context is, read from the end of its transcript (ARCHITECTURE §14.1).

Checkpoints make a paid pass when a session's context fill crosses a threshold, so every
Stop has to know the fill, cheaply: the transcript is read backwards in blocks from its end
and the first (latest) record that carries usage wins. Only lines that mention a usage key
are decoded, so a long session costs a few kilobytes of reading, not a parse of the file.

What each harness writes:

* Claude Code: every ``assistant`` record's ``message.usage``; the prompt the model saw is
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``. Sidechain
  (subagent) records are skipped: their context is not the session's.
* Codex: ``event_msg`` records of type ``token_count``; ``info.last_token_usage.input_tokens``
  is the last request's prompt (OpenAI counts cached tokens inside ``input_tokens``).
* Copilot CLI: ``session.usage_info`` (``currentTokens``) and ``assistant.usage`` are
  ephemeral in the CLI (not written to ``events.jsonl``), so they are used only where they
  exist; ``session.compaction_complete`` (``postCompactionTokens``) is on disk. A Copilot
  session therefore mostly reads as 0% and gets its deep pass at its end or when idle.

A transcript with no usage anywhere reads as ``None`` (0%).

**Bounded.** The scan never holds a line longer than :data:`MAX_LINE_BYTES` (a usage record
is small; a longer line is passed over without being joined, so a 100 MB single-line
transcript is one linear read, not a quadratic one), and a capture passes ``floor``: the
size an earlier capture of the session already scanned, below which nothing new can be. A
session whose latest usage lies behind a huge line is not read back over it at every Stop.
"""

from __future__ import annotations

import json
import os
from typing import Any

from reflect_jobs.fsio import lines_backwards, open_regular

#: Bytes read per step backwards from the end of the file.
BLOCK = 64 * 1024
#: A line longer than this is passed over (never joined, never decoded).
MAX_LINE_BYTES = 1024 * 1024
#: Substrings of a line that may carry usage; other lines are never decoded.
_HINTS = (b'"usage"', b'"token_count"', b"usage_info", b"assistant.usage", b"postCompaction")


def _int(value: object) -> int:
    """A token count as an int; anything that is not a non-negative number counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value) if value > 0 and value == value and value != float("inf") else 0


def record_context_tokens(record: object) -> int | None:
    """The context size one decoded record reports, or None when it reports none.

    Args:
        record: One JSON line of a Claude Code, Codex or Copilot CLI transcript.

    Returns:
        The prompt tokens the model saw at that record (see the module docstring for each
        harness), or None for a record without usage (and for a sidechain record).
    """
    if not isinstance(record, dict):
        return None
    rtype = record.get("type")
    if rtype == "assistant":
        if record.get("isSidechain") is True:
            return None
        msg = record.get("message")
        usage = msg.get("usage") if isinstance(msg, dict) else None
        if not isinstance(usage, dict):
            return None
        return sum(
            _int(usage.get(k))
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
    payload = record.get("payload")
    if rtype == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":
        info = payload.get("info")
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        return _int(last.get("input_tokens")) if isinstance(last, dict) else None
    data = record.get("data")
    if not isinstance(data, dict):
        return None
    if rtype == "session.usage_info":
        return _int(data.get("currentTokens"))
    if rtype == "assistant.usage":
        return sum(
            _int(data.get(k)) for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens")
        )
    if rtype == "session.compaction_complete" and "postCompactionTokens" in data:
        return _int(data.get("postCompactionTokens"))
    return None


def _decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:  # a torn last line, a damaged record: not usage
        return None


def context_tokens(path: str, *, end: int | None = None, floor: int = 0) -> int | None:
    """The latest context size the transcript reports, reading backwards from its end.

    Args:
        path: The transcript file.
        end: Read only the first ``end`` bytes (the size the capture saw); default the
            whole file.
        floor: Read nothing before this offset (the size an earlier capture of the session
            scanned: the caller keeps the fill it found there). A floor past the end reads
            nothing.

    Returns:
        The tokens of the latest record between ``floor`` and ``end`` that reports usage,
        or None when no record there does.

    Raises:
        OSError: The file cannot be opened or read, or is not a regular file (a FIFO here
            hung prepare for ever: ``fsio.NotRegularFile``).
    """
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        pos = size if end is None else max(0, min(end, size))
        for line in lines_backwards(fh, pos, max(0, floor), max_line=MAX_LINE_BYTES, block=BLOCK):
            if any(h in line for h in _HINTS):
                tokens = record_context_tokens(_decode(line))
                if tokens is not None:
                    return tokens
    return None
