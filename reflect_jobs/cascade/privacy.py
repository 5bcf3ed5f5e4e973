"""``strip_private``: remove ``<private>`` and machine-context spans (SPEC-drain §3.4).

Same semantics as the original filter — depth-aware, case-insensitive, attributes allowed,
fail-closed (an unclosed tag strips to the end), ``<private>`` replaced by a visible marker,
machine tags removed silently, orphan closing tags left alone — but the cascade applies it to
WHOLE turns before slicing (§10 B17): a window can then neither start inside a span (leak)
nor cut a span's closing tag off (over-strip).
"""

from __future__ import annotations

import re

PRIVATE_MARKER = "[private content removed]"
TAGS = (
    "private",
    "claude-mem-context",
    "system-reminder",
    "system_instruction",
    "persisted-output",
    "reflect-private",
)


def _patterns(tag: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    name = re.escape(tag)
    opening = re.compile(rf"<{name}(?:\s[^>]*)?>", re.IGNORECASE)
    closing = re.compile(rf"</{name}\s*>", re.IGNORECASE)
    return opening, closing


_PATTERNS = {tag: _patterns(tag) for tag in TAGS}


def _strip_tag(text: str, tag: str) -> str:
    opening, closing = _PATTERNS[tag]
    replacement = PRIVATE_MARKER if tag == "private" else ""
    out: list[str] = []
    pos = 0
    while True:
        start = opening.search(text, pos)
        if start is None:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos : start.start()])
        out.append(replacement)
        depth, cursor = 1, start.end()
        while depth:
            nxt_open = opening.search(text, cursor)
            nxt_close = closing.search(text, cursor)
            if nxt_close is None:  # unclosed: fail closed, drop everything after
                return "".join(out)
            if nxt_open is not None and nxt_open.start() < nxt_close.start():
                depth += 1
                cursor = nxt_open.end()
            else:
                depth -= 1
                cursor = nxt_close.end()
        pos = cursor


def strip_private(text: str) -> str:
    """Return ``text`` without private/machine spans; unchanged if it holds no ``<``.

    Args:
        text: One WHOLE turn (a span may cross lines, so never a window of one).

    Returns:
        The text with each outermost ``<private>`` span replaced by ``PRIVATE_MARKER`` and
        each machine span (the other ``TAGS``) removed; an unclosed opening tag removes
        everything after it.
    """
    if not text or "<" not in text:
        return text
    for tag in TAGS:
        text = _strip_tag(text, tag)
    return text
