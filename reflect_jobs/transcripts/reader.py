"""``read_transcript``: stream a transcript file into a bounded ``Transcript``.

The file is read line by line in binary (so only ``\\n`` ends a record and undecodable bytes
are detected), one record at a time; the raw file is never held. A file that grows, shrinks
or vanishes while open is read as far as it goes: a partial last line is just a malformed
line. Only a file with no usable record at all raises ``UnreadableTranscript``.
"""

from __future__ import annotations

import importlib
import json
import os
import stat
from collections.abc import Callable
from functools import cache
from pathlib import Path

from reflect_jobs import harnesses
from reflect_jobs.transcripts.budget import HeadTailBuffer
from reflect_jobs.transcripts.child import ChildScanner
from reflect_jobs.transcripts.model import Transcript, UnreadableTranscript
from reflect_jobs.transcripts.records import ParsedRecord
from reflect_jobs.transcripts.sniff import record_format

Parser = Callable[[object], ParsedRecord | None]


@cache
def parser_for(fmt: str) -> Parser:
    """The record parser of a harness, imported on first use from its registry entry.

    Args:
        fmt: A harness name (:data:`reflect_jobs.harnesses.NAMES`).

    Returns:
        Its ``parse_record`` function (``Harness.parser``, ``"module:function"``).

    Raises:
        KeyError: ``fmt`` is not a harness.
    """
    module, _, func = harnesses.get(fmt).parser.partition(":")
    return getattr(importlib.import_module(module), func)


# A JSONL line longer than this is skipped (counted malformed) without being held: dialogue
# turns are far smaller; lines this big are tool output, which is dropped anyway.
MAX_LINE_BYTES = 8 * 1024 * 1024
SNIFF_RECORDS = 50  # undecided after this many records → Claude Code


class _Stats:
    def __init__(self) -> None:
        self.total = 0
        self.malformed = 0
        self.content_lines = 0
        self.json_records = 0
        self.usable = 0
        self.binary = False


def _lines(fh, stats: _Stats):
    """Yield decoded, stripped, non-blank lines; over-long and binary lines count malformed."""
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        stats.total += 1
        if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES:
            while raw and not raw.endswith(b"\n"):  # discard the rest of a giant line
                raw = fh.readline(MAX_LINE_BYTES)
            stats.content_lines += 1
            stats.malformed += 1
            continue
        if not raw.strip():
            continue
        stats.content_lines += 1
        if b"\x00" in raw:
            stats.binary = True
            stats.malformed += 1
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            stats.binary = True
            line = raw.decode("utf-8", errors="replace")
        yield line


def _open(path: Path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UnreadableTranscript("file not found (vanished?)") from None
    except OSError as exc:
        raise UnreadableTranscript(f"cannot stat file: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableTranscript("not a file")
    if st.st_size == 0:
        raise UnreadableTranscript("empty file")
    try:
        return open(path, "rb")  # noqa: SIM115 - closed by the caller's with-block
    except FileNotFoundError:
        raise UnreadableTranscript("file not found (vanished?)") from None
    except IsADirectoryError:
        raise UnreadableTranscript("not a file") from None
    except OSError as exc:
        raise UnreadableTranscript(f"cannot open file: {exc.strerror or exc}") from None


def _unreadable_reason(stats: _Stats) -> str:
    if stats.content_lines == 0:
        return "empty file"
    if stats.json_records == 0:
        return "binary data" if stats.binary else "no JSON records"
    return "no transcript records (JSON of an unrecognised shape)"


def read_transcript(
    path: str | os.PathLike[str],
    *,
    harness: str | None = None,
    max_chars: int = 2_000_000,
) -> Transcript:
    """Read a Claude Code, Codex or Copilot transcript into dialogue turns.

    ``harness`` ("claude"/"codex"/"copilot") picks the parser; without it the format is
    sniffed from the first records. ``max_chars`` bounds the kept dialogue (head ¼, most
    recent ¾; see ``budget``).

    Args:
        path: The transcript file.
        harness: ``claude``, ``codex``, ``copilot`` or an alias in ``HARNESS_ALIASES``.
            ``None`` or ``""``: the first record that proves a format decides, among the
            first ``SNIFF_RECORDS`` JSON records; Claude Code when none does.
        max_chars: Bound on the kept dialogue text, in characters.

    Returns:
        The :class:`Transcript`: kept turns, the format used, the counts of lines and
        malformed lines, the characters dropped from the middle, and whether it is one of
        our own writer's sessions (``child_session``).

    Raises:
        UnreadableTranscript: The file is missing, not a regular file or empty, or holds no
            usable record (the message says which).
        ValueError: ``harness`` is not a known name.
    """
    fmt = (harnesses.resolve(harness) or harness) if harness else None
    if fmt is not None and fmt not in harnesses.NAMES:
        raise ValueError(f"unknown harness {harness!r}; expected one of {harnesses.NAMES}")
    stats = _Stats()
    buffer = HeadTailBuffer(max_chars)
    scanner = ChildScanner()
    pending: list[object] = []

    def consume(record: object) -> None:
        assert fmt is not None
        parsed = parser_for(fmt)(record)
        if parsed is None:
            stats.malformed += 1
            return
        stats.usable += 1
        if parsed.scan:
            scanner.feed(parsed.scan)
        elif not scanner.done:
            scanner.feed([])
        for role, text, timestamp in parsed.turns:
            buffer.add(role, text, timestamp)

    with _open(Path(path)) as fh:
        try:
            for line in _lines(fh, stats):
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):  # e.g. a line of 100k nested "["
                    stats.malformed += 1
                    continue
                stats.json_records += 1
                if fmt is None:
                    pending.append(record)
                    fmt = record_format(record)
                    if fmt is None and len(pending) < SNIFF_RECORDS:
                        continue
                    fmt = fmt or "claude"
                    for held in pending:
                        consume(held)
                    pending.clear()
                    continue
                consume(record)
        except OSError:
            pass  # the file changed under us (e.g. truncated on a network FS): keep what we read
    if fmt is None:
        fmt = "claude"
        for held in pending:
            consume(held)
    if stats.usable == 0:
        raise UnreadableTranscript(_unreadable_reason(stats))
    return Transcript(
        format=fmt,
        turns=buffer.turns(),
        malformed_lines=stats.malformed,
        total_lines=stats.total,
        dropped_chars=buffer.dropped_chars,
        child_session=scanner.found,
    )
