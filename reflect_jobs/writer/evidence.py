"""Evidence or nothing: a learning is kept only when its quote occurs in the slice that was sent.

A model can store what the session never showed — a hypothesis, a dead end, an invented
fact. So every CREATE carries ``learning.evidence``, a short verbatim quote of the slice
(ARCHITECTURE §6), and this module checks it against the exact slice text the prompt held,
before the plan is stored. It also says *whose* words the quote is (``evidence_origin``), by
locating it in the slice's lines (``cascade/origins.py``), never by the model's claim.

Matching, and why:

* Both sides are normalised the same way, one character at a time so every normalised
  character maps back to the slice: Unicode compatibility decomposition (NFKD, so a quote
  that differs from the slice only by NFKC-equivalent forms — ``ﬁ``/``fi``, full-width
  letters, ``…``/``...``, composed/decomposed accents — matches), case folded, typographic
  quotes and dashes made ASCII, markdown's code and emphasis marks (`` ` ``, ``*``) left
  out (a model quoting `` `pnpm install` `` as ``pnpm install`` quotes it), and whitespace
  runs (line breaks included) collapsed to one space. The ``[context] `` mark and the ``[… line truncated]`` tail the slicer adds are not
  part of what anyone said, so they are left out of the searched text.
* Only dialogue lines are searched: a quote of the slice header, the revision block (our own
  learnings) or the reflection items block is no evidence. A quote may span lines of one
  window, not the ``…`` gap between two windows.
* A quote shorter than :data:`MIN_WORDS` words or :data:`MIN_CHARS` characters proves nothing
  (``"yes"`` occurs in every slice) and counts as missing.
* Bounded: only the first :data:`SCAN_CHARS` characters of what the model wrote are looked
  at, and the normalised quote is cut to :data:`EVIDENCE_MAX_CHARS` — a prefix of a verbatim
  quote is still verbatim — so a 10 MB "quote" costs what a 300-character one does.
* The stored evidence is the slice's own text of the matched span (verbatim, ≤ 300
  characters), not the model's rendering of it.
* Origin: of every occurrence (at most :data:`MAX_OCCURRENCES`), the least trusted line it
  spans decides it (a quote that runs from a person's line into a pasted page is the page's);
  of the occurrences, the most trusted wins (a person who repeats what a page said has said
  it). ``person`` > ``assistant`` > ``tool``.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

from reflect_jobs.cascade.origins import ASSISTANT, NONE, ORIGIN_NAMES, PERSON, TOOL, decode
from reflect_jobs.cascade.slicing import CONTEXT_MARK, LINE_TRUNCATED

#: Longest evidence stored, in characters (ARCHITECTURE §6).
EVIDENCE_MAX_CHARS = 300
#: How much of the model's quote is looked at; the rest of a runaway value is ignored.
SCAN_CHARS = 4 * EVIDENCE_MAX_CHARS
#: A quote needs at least this many words and characters (normalised) to prove anything.
MIN_WORDS = 3
MIN_CHARS = 12
#: At most this many occurrences of one quote are weighed for its origin.
MAX_OCCURRENCES = 50
#: ``evidence_origin`` values, most trusted first.
ORIGINS = ("person", "assistant", "tool")
_TRUST = {PERSON: 2, ASSISTANT: 1, TOOL: 0}
_SEGMENT_BREAK = "\x00"  # between windows: no quote can span it (normalised text has none)
_QUOTES: dict[int, str | None] = dict.fromkeys(
    map(ord, "\u2018\u2019\u201a\u201b\u2032\u2035\u00b4"), "'"
)
_QUOTES.update(dict.fromkeys(map(ord, "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb"), '"'))
_QUOTES.update(dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-"))
_QUOTES.update(dict.fromkeys(map(ord, "`*"), None))  # markdown code and emphasis marks
_WRAPPERS = "\"'\u2018\u2019\u201c\u201d\u00ab\u00bb` \t\r\n"


@functools.lru_cache(maxsize=8192)
def _norm_char(ch: str) -> str:
    """One character's normalised form (possibly several characters, possibly none)."""
    out = unicodedata.normalize("NFKD", ch).casefold().translate(_QUOTES)
    return "".join(" " if c.isspace() else c for c in out if c.isprintable() or c.isspace())


def normalise(text: str) -> str:
    """The form quotes and slices are compared in (see the module docstring).

    Args:
        text: Any text.

    Returns:
        ``text`` decomposed (NFKD), case folded, with ASCII quotes and dashes and single
        spaces, stripped.
    """
    return " ".join("".join(_norm_char(c) for c in text).split())


@dataclass(frozen=True)
class Evidence:
    """A quote found in the sent slice: its verbatim text there and whose words it is."""

    quote: str
    origin: str  # "person" | "assistant" | "tool"


class SentSlice:
    """The dialogue of one sent slice, normalised and searchable, with each character's line.

    Built once per answer; every quote of the answer is looked up in it.
    """

    def __init__(self, slice_text: str, origins: str) -> None:
        """Index the dialogue lines of ``slice_text``.

        Args:
            slice_text: The slice exactly as the prompt held it (revision block and
                reflection items block included: they are skipped by their codes).
            origins: One origin code per line of ``slice_text`` (``cascade/origins.py``);
                lines beyond it are not dialogue. Empty when unknown (nothing is found).
        """
        self.lines: list[str] = []
        self.codes: list[str] = []
        chars: list[str] = []
        where: list[tuple[int, int]] = []  # (line, offset in line) of each normalised char
        for raw, code in zip(slice_text.split("\n"), origins, strict=False):
            if code == NONE:
                if chars and chars[-1] != _SEGMENT_BREAK:
                    chars.append(_SEGMENT_BREAK)
                    where.append((-1, 0))
                continue
            line = raw.removeprefix(CONTEXT_MARK).removesuffix(LINE_TRUNCATED)
            index = len(self.lines)
            self.lines.append(line)
            self.codes.append(code)
            if chars and chars[-1] not in (" ", _SEGMENT_BREAK):
                chars.append(" ")  # a line break is whitespace
                where.append((index, 0))
            for offset, ch in enumerate(line):
                for out in _norm_char(ch):
                    if out == " " and (not chars or chars[-1] in (" ", _SEGMENT_BREAK)):
                        continue
                    chars.append(out)
                    where.append((index, offset))
        self.text = "".join(chars)
        self._where = where

    def find(self, quote: object) -> Evidence | None:
        """Where ``quote`` occurs in the dialogue, and whose words it is.

        Args:
            quote: What the model wrote as evidence (any value; only a string can match).

        Returns:
            The verbatim span of the slice (at most :data:`EVIDENCE_MAX_CHARS` characters)
            and its origin; ``None`` when the quote is missing, too short, or absent.
        """
        needle = quote_key(quote)
        if needle is None:
            return None
        best: tuple[int, int] | None = None
        best_trust = -1
        start = self.text.find(needle)
        seen = 0
        while start >= 0 and seen < MAX_OCCURRENCES:
            end = start + len(needle)
            spanned = {self._where[i][0] for i in range(start, end) if self._where[i][0] >= 0}
            trust = min(_TRUST.get(self.codes[i], 0) for i in spanned) if spanned else -1
            if trust > best_trust:
                best, best_trust = (start, end), trust
            if best_trust == _TRUST[PERSON]:
                break
            seen += 1
            start = self.text.find(needle, start + 1)
        if best is None or best_trust < 0:
            return None
        origin = {v: k for k, v in _TRUST.items()}[best_trust]
        return Evidence(self._span(*best), ORIGIN_NAMES[origin])

    def _span(self, start: int, end: int) -> str:
        """The slice's own text from normalised position ``start`` to ``end``."""
        first, last = self._where[start], self._where[end - 1]
        if first[0] == last[0]:
            text = self.lines[first[0]][first[1] : last[1] + 1]
        else:
            parts = [self.lines[first[0]][first[1] :]]
            parts += self.lines[first[0] + 1 : last[0]]
            parts.append(self.lines[last[0]][: last[1] + 1])
            text = "\n".join(parts)
        text = " ".join(text.split())
        if len(text) > EVIDENCE_MAX_CHARS:
            text = text[: EVIDENCE_MAX_CHARS - 1] + "…"
        return text


def quote_key(quote: object) -> str | None:
    """The normalised needle for a model's quote, or ``None`` when it can prove nothing.

    Args:
        quote: What the model wrote (any JSON value).

    Returns:
        The first :data:`SCAN_CHARS` characters, outer quote marks and a ``[context] `` mark
        removed, normalised and cut to :data:`EVIDENCE_MAX_CHARS`; ``None`` for a
        non-string or a quote under :data:`MIN_WORDS` words or :data:`MIN_CHARS` characters.
    """
    if not isinstance(quote, str):
        return None
    head = quote[:SCAN_CHARS].strip(_WRAPPERS).removeprefix(CONTEXT_MARK).strip(_WRAPPERS)
    needle = normalise(head)[:EVIDENCE_MAX_CHARS].strip()
    words = [w for w in needle.split(" ") if any(c.isalnum() for c in w)]
    if len(needle) < MIN_CHARS or len(words) < MIN_WORDS:
        return None
    return needle


def sent_slice(slice_text: str, origin_runs: object) -> SentSlice:
    """The searchable dialogue of a sent slice.

    Args:
        slice_text: The slice file's text, exactly as sent.
        origin_runs: ``prepare_stats["origins"]`` (run-length codes; see
            :func:`reflect_jobs.cascade.origins.decode`). A job prepared before origins
            were recorded has none: then every line of the slice counts as text the session
            read (evidence is still checked, and what it keeps waits for review).

    Returns:
        The :class:`SentSlice`.
    """
    codes = decode(origin_runs)
    if not codes:
        codes = TOOL * (slice_text.count("\n") + 1)
    return SentSlice(slice_text, codes)
