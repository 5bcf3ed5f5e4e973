"""The condensed transcript a reflection pass reads (seed 002, the reflector's step 2).

From the session's last committed pass (its watermark, a byte offset) to the end of what
the dialogue reader saw, keep what tells a reader what the session *did*: the person's
prompts, the assistant's text, tool calls with their names and short arguments, errors,
and short results such as a test summary (:mod:`.tool_calls`). Every other tool output is
dropped. So a checkpoint costs only what was said since the one before, and a session that
simply does its work (no correction anywhere) still shows what it finished.

Bounded at every size: the file is read from the watermark with a line bound
(:data:`LINE_BYTES`; a longer record, e.g. one 50 MB tool error, is passed over unread and
leaves one marker line), every entry is cut to its own cap, and the whole is kept within
``max_chars`` as a head quarter and a tail (the latest work, where conclusions are), the
middle dropped and counted. Every line is privacy-stripped and secret-redacted before it is
kept (``cascade.privacy``, ``cascade.secrets``), like every other text we send.

Each line has an origin code (``cascade/origins.py``): the person's lines ``p``, the
assistant's text and tool calls ``a``, tool errors and results (text the session read) ``t``
— the write stage checks the evidence of every item the model closes or adds against them.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reflect_jobs import harnesses
from reflect_jobs.cascade.origins import ASSISTANT, TOOL, turn_line_origins
from reflect_jobs.cascade.privacy import strip_private
from reflect_jobs.cascade.secrets import redact_secrets
from reflect_jobs.fsio import open_regular
from reflect_jobs.transcripts.model import Turn
from reflect_jobs.transcripts.noise import INTERRUPTED
from reflect_jobs.transcripts.reader import parser_for
from reflect_jobs.transcripts.tool_calls import ToolEvent, tool_events

#: A transcript line longer than this is passed over unread (one marker line instead).
LINE_BYTES = 1024 * 1024
#: A person's prompt or the assistant's text is cut to this many characters (head and tail).
TURN_CHARS = 3_000
#: How each kind of line starts (the model reads these labels; docs/REFLECTIONS.md).
LABELS = {
    "user": "[person] ",
    "assistant": "[assistant] ",
    "call": "[tool call] ",
    "error": "[tool error] ",
    "result": "[tool result] ",
}
_ORIGIN = {"call": ASSISTANT, "error": TOOL, "result": TOOL}
GAP_LINE = "[… {n} characters of the session left out …]"


@dataclass
class Condensed:
    """The condensed transcript: its lines, one origin code per line, and its counts.

    Attributes:
        lines: The text, one entry per line.
        origins: One code per line (``p``/``a``/``t``; the gap line ``-``).
        person_turns: The person's prompts read (interruptions not counted).
        tool_calls: Tool calls read.
        errors: Tool errors read.
        dropped_chars: Characters left out of the middle to stay within the budget.
        skipped_records: Records too long to read (each left a marker line).
    """

    lines: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    person_turns: int = 0
    tool_calls: int = 0
    errors: int = 0
    dropped_chars: int = 0
    skipped_records: int = 0

    @property
    def text(self) -> str:
        """The lines joined by newlines."""
        return "\n".join(self.lines)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2 - 3
    return f"{text[:half]}\n[…]\n{text[-half:]}"


def _clean(text: str) -> str:
    """Privacy-strip and secret-redact one entry (the transcripts' own filters)."""
    return redact_secrets(strip_private(text))[0]


class _Budget:
    """Entries (lists of ``(line, code)``) kept as a head quarter and a tail, O(budget)."""

    def __init__(self, max_chars: int) -> None:
        self.head_budget = max(max_chars, 40) // 4
        self.tail_budget = max(max_chars, 40) - self.head_budget
        self.head: list[list[tuple[str, str]]] = []
        self.head_chars = 0
        self.head_full = False
        self.tail: deque[tuple[list[tuple[str, str]], int]] = deque()
        self.tail_chars = 0
        self.dropped = 0

    def add(self, entry: list[tuple[str, str]]) -> None:
        size = sum(len(line) + 1 for line, _ in entry)
        if not self.head_full and self.head_chars + size <= self.head_budget:
            self.head.append(entry)
            self.head_chars += size
            return
        self.head_full = True
        if size > self.tail_budget:  # one entry bigger than the tail: keep its end
            kept: list[tuple[str, str]] = []
            used = 0
            for line, code in reversed(entry):
                if used + len(line) + 1 > self.tail_budget:
                    room = self.tail_budget - used - 1
                    if room > 0:
                        kept.append((line[-room:], code))
                    break
                kept.append((line, code))
                used += len(line) + 1
            self.dropped += size - used
            entry, size = list(reversed(kept)), used
        self.tail.append((entry, size))
        self.tail_chars += size
        while self.tail_chars > self.tail_budget and len(self.tail) > 1:
            _, old = self.tail.popleft()
            self.tail_chars -= old
            self.dropped += old

    def lines(self) -> list[tuple[str, str]]:
        out = [pair for entry in self.head for pair in entry]
        if self.dropped:
            out.append((GAP_LINE.format(n=self.dropped), "-"))
        out += [pair for entry, _ in self.tail for pair in entry]
        return out


def _turn_entry(role: str, text: str) -> list[tuple[str, str]]:
    text = _cut(_clean(text), TURN_CHARS)
    turn = Turn(0, role, text)
    codes = turn_line_origins([turn])
    lines = text.split("\n")
    lines[0] = LABELS.get(role, LABELS["assistant"]) + lines[0]
    return list(zip(lines, codes, strict=False))


def _tool_entry(event: ToolEvent) -> list[tuple[str, str]]:
    return [(LABELS[event.kind] + _clean(event.text), _ORIGIN[event.kind])]


def condense(
    path: str | os.PathLike[str],
    harness: str,
    *,
    since: int = 0,
    until: int | None = None,
    max_chars: int = 24_000,
) -> Condensed:
    """Condense a transcript from byte ``since`` up to ``until`` (see the module docstring).

    Args:
        path: The transcript (opened with ``fsio.open_regular``: a FIFO is refused).
        harness: ``claude``, ``codex`` or ``copilot`` (an alias is resolved).
        since: The session's checked watermark (the start of a record; 0: the whole file).
        until: Stop at this byte offset (the end of the last complete dialogue record the
            reader saw); None: the end of the file.
        max_chars: The budget of the condensed text (``REFLECT_REFLECT_MAX_CHARS``).

    Returns:
        The :class:`Condensed` transcript (empty when nothing was said since ``since``).

    Raises:
        OSError: The file cannot be opened (the caller treats it as unreadable).
    """
    fmt = harnesses.resolve(harness) or harness
    parse = parser_for(fmt) if fmt in harnesses.NAMES else None
    budget = _Budget(max_chars)
    out = Condensed()
    with open_regular(path) as fh:
        if since > 0:
            fh.seek(since)
        offset = since
        while until is None or offset < until:
            raw = fh.readline(LINE_BYTES)
            if not raw:
                break
            offset += len(raw)
            if not raw.endswith(b"\n") and len(raw) >= LINE_BYTES:
                size = len(raw)
                while raw and not raw.endswith(b"\n"):  # pass over the rest unread
                    raw = fh.readline(LINE_BYTES)
                    offset += len(raw)
                    size += len(raw)
                out.skipped_records += 1
                mib = size / (1024 * 1024)
                budget.add([(f"[a record of {mib:.1f} MiB was too long to read]", TOOL)])
                continue
            try:
                record = json.loads(raw.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                continue
            _add_record(record, fmt, parse, budget, out)
    out.dropped_chars = budget.dropped
    pairs = budget.lines()
    out.lines = [line for line, _ in pairs]
    out.origins = [code for _, code in pairs]
    return out


def _add_record(
    record: object,
    fmt: str,
    parse: Callable[[object], Any] | None,
    budget: _Budget,
    out: Condensed,
) -> None:
    """Add one record's dialogue turns and tool events to the budget, counting them."""
    parsed = parse(record) if parse is not None else None
    if parsed is not None and not parsed.sidechain:
        for role, text, _ts in parsed.turns:
            budget.add(_turn_entry(role, text))
            if role == "user" and text.strip() != INTERRUPTED:
                out.person_turns += 1
    for event in tool_events(fmt, record):
        budget.add(_tool_entry(event))
        out.tool_calls += event.kind == "call"
        out.errors += event.kind == "error"


#: The heading of the condensed transcript inside a prompt's slice (docs/REFLECTIONS.md).
SECTION_TITLE = "## Condensed transcript since the last pass (for the reflection items)"
#: Skips of the learning cascade after which a reflection pass may still be made: the
#: session had nothing new to *learn*, but it may still have finished or left work.
REFLECTABLE_SKIPS = frozenset({"no_signal", "no_new_signal", "dup_signal_hash", "dup_chunk_hash"})


def section(condensed: Condensed, *, source_name: str, alone: bool) -> tuple[str, str]:
    """The condensed transcript as a slice section, and one origin code per line of it.

    Args:
        condensed: What :func:`condense` kept.
        source_name: The transcript's file name (titles the slice when ``alone``).
        alone: No signal windows precede it: the section opens the slice itself.

    Returns:
        ``(text, codes)``: the text starts with a blank line and the heading (its lines are
        no one's words, code ``-``), then the condensed lines with their own codes.
    """
    head: list[str] = []
    if alone:
        head += [
            f"# Reflect slice of {os.path.basename(source_name) or source_name}",
            "# No correction or approval was found since the last pass: this is a reflection",
            "# pass for the Reflection Store (its items and summary); learn only what it proves.",
        ]
    head += [
        "",
        SECTION_TITLE,
        f"# {condensed.person_turns} person turns, {condensed.tool_calls} tool calls, "
        f"{condensed.errors} errors; tool output is left out except errors and short results.",
    ]
    if condensed.dropped_chars:
        head.append(f"# {condensed.dropped_chars} characters were left out of the middle.")
    lines = head + condensed.lines
    codes = "-" * len(head) + "".join(condensed.origins)
    return "\n".join(lines), codes
