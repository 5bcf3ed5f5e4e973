"""``read_transcript``: stream a transcript file into a bounded ``Transcript``.

The file is read line by line in binary (so only ``\\n`` ends a record and undecodable bytes
are detected), one record at a time; the raw file is never held. A file that grows, shrinks
or vanishes while open is read as far as it goes: a partial last line is just a malformed
line. Only a file with no usable record at all raises ``UnreadableTranscript``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
from collections.abc import Callable
from functools import cache
from pathlib import Path

from reflect_jobs import harnesses
from reflect_jobs.fsio import NotRegularFile, open_regular
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
# turns are far smaller; lines this big are tool output, which is dropped anyway. The
# dialogue budget bounds a line too (:func:`line_limit`): a line longer than four bytes per
# character of the budget is cut at read time, never decoded whole.
MAX_LINE_BYTES = 8 * 1024 * 1024
MIN_LINE_BYTES = 64 * 1024


def line_limit(max_chars: int) -> int:
    """The longest transcript line read whole for a dialogue budget of ``max_chars``.

    Args:
        max_chars: The kept-dialogue budget in characters.

    Returns:
        Four bytes (the longest UTF-8 character) per character of the budget, within
        [:data:`MIN_LINE_BYTES`, :data:`MAX_LINE_BYTES`].
    """
    return max(MIN_LINE_BYTES, min(MAX_LINE_BYTES, 4 * int(max_chars)))


SNIFF_RECORDS = 50  # undecided after this many records → Claude Code
_BOM = b"\xef\xbb\xbf"


class _Stats:
    def __init__(self) -> None:
        self.total = 0
        self.malformed = 0
        self.content_lines = 0
        self.json_records = 0
        self.usable = 0
        self.binary = False
        self.main = 0  # dialogue records of the session itself
        self.sidechain = 0  # dialogue records of a subagent
        self.not_interactive = ""
        self.offset = 0  # bytes read so far: the end of the line last yielded
        self.digest = hashlib.sha256()  # of those bytes
        self.prefix_at: int | None = None
        self.prefix_digest: str | None = None
        self.line_complete = True

    def consumed(self, raw: bytes) -> None:
        """Count and hash ``raw``; note the digest when ``prefix_at`` is reached exactly."""
        self.offset += len(raw)
        self.digest.update(raw)
        self.line_complete = raw.endswith(b"\n")
        if self.offset == self.prefix_at:
            self.prefix_digest = self.digest.hexdigest()


class _Dialogue:
    """The kept turns, with a second buffer for files whose user speech is a fallback.

    Codex records a typed message twice (``ParsedRecord.fallback``): the primary buffer gets
    the ``user_message`` events, the fallback buffer the ``response_item`` copies. The
    fallback buffer exists only once a record offers a fallback, and is used only when the
    file produced no primary user turn at all, so a turn is never kept twice.
    """

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.primary = HeadTailBuffer(max_chars)
        self.fallback: HeadTailBuffer | None = None
        self.primary_user = False

    def add(self, parsed: ParsedRecord, offset: int | None = None) -> None:
        for role, text, timestamp in parsed.turns:
            self.primary.add(role, text, timestamp, offset)
            self.primary_user = self.primary_user or role == "user"
        if parsed.fallback is not None and self.fallback is None:
            self.fallback = HeadTailBuffer(self.max_chars)
            for turn in self.primary.turns():  # replay what came before (bounded)
                self.fallback.add(turn.role, turn.text, turn.timestamp, turn.end_offset)
        if self.fallback is not None:
            source = parsed.turns if parsed.fallback is None else parsed.fallback
            for role, text, timestamp in source:
                self.fallback.add(role, text, timestamp, offset)

    def chosen(self) -> HeadTailBuffer:
        if self.fallback is not None and not self.primary_user:
            return self.fallback
        return self.primary


def _lines(fh, stats: _Stats, limit: int = MAX_LINE_BYTES):
    """Yield decoded, stripped, non-blank lines; over-long and binary lines count malformed."""
    while True:
        raw = fh.readline(limit)
        if not raw:
            return
        stats.consumed(raw)
        stats.total += 1
        if not raw.endswith(b"\n") and len(raw) >= limit:
            while raw and not raw.endswith(b"\n"):  # discard the rest of a giant line
                raw = fh.readline(limit)
                stats.consumed(raw)
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
        if stats.total == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]  # an editor's UTF-8 BOM must not cost the first record
            if not raw.strip():
                stats.content_lines -= 1  # the BOM was all the line held
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
        return open_regular(path)  # closed by the caller's with-block; a FIFO never blocks
    except FileNotFoundError:
        raise UnreadableTranscript("file not found (vanished?)") from None
    except (IsADirectoryError, NotRegularFile):
        raise UnreadableTranscript("not a file") from None
    except OSError as exc:
        raise UnreadableTranscript(f"cannot open file: {exc.strerror or exc}") from None


def _unreadable_reason(stats: _Stats) -> str:
    if stats.content_lines == 0:
        return "empty file"
    # A stray line of random bytes can parse as JSON (a lone digit): binary wins unless the
    # JSON lines outnumber the malformed ones.
    if stats.binary and stats.json_records <= stats.malformed:
        return "binary data"
    if stats.json_records == 0:
        return "no JSON records"
    return "no transcript records (JSON of an unrecognised shape)"


def read_transcript(
    path: str | os.PathLike[str],
    *,
    harness: str | None = None,
    max_chars: int = 2_000_000,
    prefix_at: int | None = None,
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
        max_chars: Bound on the kept dialogue text, in characters; a line longer than
            :func:`line_limit` of it is skipped unread (counted malformed).
        prefix_at: A byte offset (a session's watermark) whose prefix digest is wanted in
            ``Transcript.prefix_digest``, computed in the same pass; it is None when no line
            of the file ends exactly there.

    Returns:
        The :class:`Transcript`: kept turns, the format used, the counts of lines, records
        and malformed lines, the characters dropped from the middle, whether it is one of
        our own writer's sessions (``child_session``), why no person took part in it
        (``not_interactive``: headless, subagent or compaction runs; ``""`` otherwise), each
        turn's ``end_offset`` and the watermark fields ``end_offset``/``end_digest``/
        ``prefix_digest``.

    Raises:
        UnreadableTranscript: The file is missing, not a regular file or empty, or holds no
            usable record (the message says which).
        ValueError: ``harness`` is not a known name.
    """
    fmt = (harnesses.resolve(harness) or harness) if harness else None
    if fmt is not None and fmt not in harnesses.NAMES:
        raise ValueError(f"unknown harness {harness!r}; expected one of {harnesses.NAMES}")
    stats = _Stats()
    stats.prefix_at = prefix_at
    if prefix_at == 0:
        stats.prefix_digest = stats.digest.hexdigest()
    dialogue = _Dialogue(max_chars)
    scanner = ChildScanner()
    pending: list[tuple[object, int, str, bool]] = []
    end: dict[str, int | str] = {"offset": 0, "digest": ""}

    def consume(record: object, offset: int, digest: str | None, complete: bool) -> None:
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
        # Who started the session shows before its first words (Codex ``session_meta``,
        # Claude Code's first user record); a later record cannot change that.
        if parsed.not_interactive and not (stats.main or stats.sidechain or stats.not_interactive):
            stats.not_interactive = parsed.not_interactive
        stats.main += parsed.main
        stats.sidechain += parsed.sidechain
        dialogue.add(parsed, offset)
        # A last line still being written (no newline yet) is read, but the watermark
        # stays before it: its bytes will differ once the newline lands.
        if (parsed.turns or parsed.fallback) and complete:
            end["offset"] = offset
            end["digest"] = digest if digest is not None else stats.digest.hexdigest()

    with _open(Path(path)) as fh:
        try:
            for line in _lines(fh, stats, line_limit(max_chars)):
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):  # e.g. a line of 100k nested "["
                    stats.malformed += 1
                    continue
                stats.json_records += 1
                if fmt is None:
                    held = (record, stats.offset, stats.digest.hexdigest(), stats.line_complete)
                    pending.append(held)
                    fmt = record_format(record)
                    if fmt is None and len(pending) < SNIFF_RECORDS:
                        continue
                    fmt = fmt or "claude"
                    for held in pending:
                        consume(*held)
                    pending.clear()
                    continue
                consume(record, stats.offset, None, stats.line_complete)
        except OSError:
            pass  # the file changed under us (e.g. truncated on a network FS): keep what we read
    if fmt is None:
        fmt = "claude"
        for held in pending:
            consume(*held)
    if stats.usable == 0:
        raise UnreadableTranscript(_unreadable_reason(stats))
    not_interactive = stats.not_interactive
    if not not_interactive and stats.sidechain and not stats.main:
        not_interactive = "subagent transcript (every message is a sidechain's)"
    buffer = dialogue.chosen()
    return Transcript(
        format=fmt,
        turns=buffer.turns(),
        malformed_lines=stats.malformed,
        total_lines=stats.total,
        dropped_chars=buffer.dropped_chars,
        child_session=scanner.found,
        end_offset=int(end["offset"]),
        end_digest=str(end["digest"]),
        prefix_digest=stats.prefix_digest,
        not_interactive=not_interactive,
        records=stats.usable,
    )
