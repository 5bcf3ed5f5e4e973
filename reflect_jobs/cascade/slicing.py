"""Slices: the signal-bearing windows of a dialogue, under a hard character cap.

What changed from the original ``slice_dialogue`` (SPEC-drain §3.2, §10 B9):

* The cap is a real bound. The original kept lines from the FRONT until the cap and always
  included the line that crossed it, so one pasted log could blow the cap and a long
  session's final corrections never made it in. Here windows are *chosen* by strength
  (HIGH first) then recency (latest first) until the budget is spent, then *emitted* in
  dialogue order. A window that does not fit shrinks to its signal line; every line is
  truncated to a per-line cap, so ``len(slice.text) <= max_chars`` always.
* Each merged window is one ``Chunk`` whose hash is the delta-retain key (§3.3); windows
  are separated by a line holding only ``…``.
* A window identical to one already chosen is not chosen again, and identical merged
  windows are emitted once: a session that repeats itself costs one window, not the cap.
* With a session watermark (``first_new``), only signals after it open windows; lines of
  a window that lie before it are prefixed ``CONTEXT_MARK`` so the writer knows they were
  already reflected on (ARCHITECTURE §3.1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from reflect_jobs.cascade.model import LEVEL_RANK, Chunk, Signal, Slice
from reflect_jobs.cascade.origins import strip_codes

GAP = "…"
LINE_TRUNCATED = " [… line truncated]"
SIGNAL_LINE_CAP = 8_000  # a correction is short; a longer "signal line" is a paste
CONTEXT_LINE_CAP = 2_000  # context only frames the signal
CONTEXT_MARK = "[context] "  # a line before the session's watermark: already reflected on


def chunk_hash(text: str) -> str:
    """First 16 hex of sha256 of the stripped chunk text (whitespace-stable at the ends).

    Args:
        text: A chunk's text.

    Returns:
        16 lowercase hex characters: the delta-retain key.
    """
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def make_chunk(text: str, origins: str = "") -> Chunk:
    """A chunk of ``text``, stripped, with its hash.

    Args:
        text: One window's lines joined by newlines.
        origins: One origin code per line of ``text`` (``cascade/origins.py``), or "".

    Returns:
        The :class:`Chunk`; its ``origins`` follow the stripping (blank lines at either
        end dropped with their codes).
    """
    codes = strip_codes(text, origins) if origins else ""
    text = text.strip()
    return Chunk(text, chunk_hash(text), codes)


def _cut(line: str, cap: int) -> str:
    if len(line) <= cap:
        return line
    keep = max(cap - len(LINE_TRUNCATED), 1)
    return line[:keep] + LINE_TRUNCATED if cap > len(LINE_TRUNCATED) else line[:cap]


def _runs(indexes: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indexes:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _assemble(pieces: list[tuple[str, str]], truncated: bool, bounded: bool) -> Slice:
    made = (make_chunk(p, codes) for p, codes in pieces if p.strip())
    chunks = list({c.hash: c for c in made}.values())
    text = f"\n{GAP}\n".join(c.text for c in chunks)
    return Slice(text=text, chunks=chunks, truncated=truncated, bounded=bounded)


def build_slice(
    lines: list[str],
    signals: list[Signal],
    *,
    context: int = 3,
    max_chars: int = 60_000,
    first_new: int = 0,
    origins: list[str] | None = None,
) -> Slice:
    """Windows of ±``context`` lines around each signal, merged, at most ``max_chars`` chars.

    Windows are chosen by strength, then recency, and emitted in dialogue order (see the
    module docstring); a window that does not fit shrinks to its signal line, or is left
    out when even that does not fit. A window whose lines read exactly like a window
    already chosen is skipped (it would tell the writer nothing new), and identical merged
    windows come out once.

    Args:
        lines: The dialogue's lines, the ones the signals' ``line_number`` index.
        signals: The signals to frame; line numbers outside ``lines`` are ignored.
        context: Lines kept on each side of a signal line.
        max_chars: Hard cap on ``len(result.text)``, in characters.
        first_new: 0-based index of the first line after the session's watermark: signals
            before it are ignored and lines before it are shown with ``CONTEXT_MARK``.
        origins: One origin code per line of ``lines`` (``cascade/origins.py``); each
            chunk then carries the codes of its lines.

    Returns:
        A :class:`Slice` with one chunk per run of adjacent kept lines; ``truncated`` when a
        window was shrunk or left out or a line was cut. Its text is empty when no signal
        is in range.
    """
    n = len(lines)
    first_new = max(first_new, 0)
    valid = [s for s in signals if first_new < s.line_number <= n]
    signal_lines = {s.line_number - 1 for s in valid}
    signal_cap = min(SIGNAL_LINE_CAP, max(max_chars - 3, 1))  # a lone signal line always fits
    context_cap = min(CONTEXT_LINE_CAP, max_chars)
    shown: dict[int, str] = {}

    def display(i: int) -> str:
        if i not in shown:
            text = _cut(lines[i], signal_cap if i in signal_lines else context_cap)
            shown[i] = CONTEXT_MARK + text if i < first_new else text
        return shown[i]

    order = sorted(valid, key=lambda s: (LEVEL_RANK.get(s.level, 9), -s.line_number))
    selected: set[int] = set()
    chosen: set[tuple[str, ...]] = set()  # the text of every window taken, line by line
    used = 0
    truncated = False
    for sig in order:
        idx = sig.line_number - 1
        window = range(max(0, idx - context), min(n, idx + context + 1))
        key = tuple(display(i) for i in window)
        if key in chosen:
            continue  # the same exchange again: sent once
        chosen.add(key)
        new = [i for i in window if i not in selected]
        if not new:
            continue
        # +2 per window for a possible "…" gap line; +1 per line for its newline.
        cost = sum(len(display(i)) + 1 for i in new) + 2
        if used + cost <= max_chars:
            selected.update(new)
            used += cost
            continue
        truncated = True
        if idx not in selected:
            cost = len(display(idx)) + 3
            if used + cost <= max_chars:
                selected.add(idx)
                used += cost
    mark = len(CONTEXT_MARK)
    if any(len(display(i)) - (mark if i < first_new else 0) < len(lines[i]) for i in selected):
        truncated = True
    pieces = [
        ("\n".join(display(i) for i in run), _codes(origins, run))
        for run in _runs(sorted(selected))
    ]
    return _assemble(pieces, truncated, bounded=False)


def _codes(origins: list[str] | None, indexes: Iterable[int]) -> str:
    """The origin codes of ``lines[i]`` for each index (``""`` without a map)."""
    if origins is None:
        return ""
    return "".join(origins[i] if i < len(origins) else "-" for i in indexes)


def bounded_view(
    lines: list[str], *, max_chars: int = 60_000, origins: list[str] | None = None
) -> Slice:
    """Head ¼ / tail ¾ of the dialogue (SPEC-drain §3.6), for when no slice can be built.

    The tail gets the larger share because the end of a session is where its conclusions
    and corrections are.

    Args:
        lines: The dialogue's lines.
        max_chars: Cap on the text, in characters: a quarter for the head, the rest (less
            the gap line) for the tail.
        origins: One origin code per line of ``lines``, carried onto the chunks.

    Returns:
        A :class:`Slice` with ``bounded`` set: one chunk when the whole dialogue fits, else
        a head chunk and a tail chunk. A first line too long for the head keeps its start,
        a last line too long for the tail its end. ``truncated`` is set when whole lines in
        the middle were left out (a cut line alone does not set it).
    """
    head_budget = max_chars // 4
    tail_budget = max_chars - head_budget - 2  # room for the "…" line
    head: list[str] = []
    used = 0
    i = 0
    while i < len(lines):
        cost = len(lines[i]) + 1
        if used + cost > head_budget:
            if not head and head_budget > 1:
                head.append(_cut(lines[i], head_budget - 1))
                i += 1
            break
        head.append(lines[i])
        used += cost
        i += 1
    tail: list[str] = []
    used = 0
    j = len(lines) - 1
    while j >= i:
        cost = len(lines[j]) + 1
        if used + cost > tail_budget:
            if not tail and tail_budget > 1:
                tail.append(lines[j][-(tail_budget - 1) :])
                j -= 1
            break
        tail.append(lines[j])
        used += cost
        j -= 1
    tail.reverse()
    omitted = j - i + 1
    head_codes = _codes(origins, range(len(head)))
    tail_codes = _codes(origins, range(j + 1, j + 1 + len(tail)))
    if omitted <= 0 and tail:
        whole = ("\n".join(head + tail), head_codes + tail_codes)
        return _assemble([whole], truncated=False, bounded=True)
    pieces = [("\n".join(head), head_codes), ("\n".join(tail), tail_codes)]
    return _assemble(pieces, truncated=omitted > 0, bounded=True)
