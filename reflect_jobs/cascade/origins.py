"""Who wrote each line of a slice: the person, the assistant, or text the session *read*.

The slice sent to the model carries no speaker labels (its bytes are the delta-retain keys,
ARCHITECTURE §3.1), so prepare keeps a map beside it: one code per slice line. The write
stage uses it to say where a learning's evidence came from (``evidence_origin``,
ARCHITECTURE §6), by locating the quote, never by trusting the model's claim.

Codes, and why:

* ``p`` — a line of the person's own turn.
* ``a`` — a line of the assistant's own text.
* ``t`` — text the session read rather than wrote: a fenced block (````` ``` ````` or
  ``~~~``) or a ``>`` block quote inside either turn — a pasted log, README, web page or
  tool output. Tool results themselves never reach a slice (``transcripts/``); what does
  reach it is what a turn copied in, and that is untrusted input like the tool result was.
* ``-`` — not dialogue: the slice header, a ``…`` gap line, the revision block, the
  reflection items block. Evidence found only there is no evidence.

Stored run-length encoded (``p3a12-1t4``) on the job's ``prepare_stats["origins"]``: a slice
of 60,000 characters has at most ~30,000 lines, and real ones change speaker every few lines.
"""

from __future__ import annotations

import re

from reflect_jobs.transcripts.model import Turn

PERSON, ASSISTANT, TOOL, NONE = "p", "a", "t", "-"
#: The ``evidence_origin`` word of each dialogue code.
ORIGIN_NAMES = {PERSON: "person", ASSISTANT: "assistant", TOOL: "tool"}
_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^\s*>")
_RUN = re.compile(r"([pat-])(\d+)")


def turn_line_origins(turns: list[Turn]) -> list[str]:
    """One code per dialogue line, parallel to ``[line for t in turns for line in t.text.split("\\n")]``.

    Args:
        turns: The filtered turns prepare slices (their roles are ``user``/``assistant``).

    Returns:
        ``p``/``a`` for a turn's own lines by role (any other role counts as ``a``), ``t``
        for the lines of a fenced block (its fence lines included) or a ``>`` quote.
    """
    out: list[str] = []
    for turn in turns:
        own = PERSON if turn.role == "user" else ASSISTANT
        fenced = False
        for line in turn.text.split("\n"):
            if _FENCE.match(line):
                out.append(TOOL)
                fenced = not fenced
            elif fenced or _QUOTE.match(line):
                out.append(TOOL)
            else:
                out.append(own)
    return out


def strip_codes(text: str, codes: str) -> str:
    """The codes of ``text.strip()``'s lines, given one code per line of ``text``.

    Args:
        text: A chunk's text before stripping.
        codes: One code per ``text.split("\\n")`` line.

    Returns:
        The codes of the lines that remain once leading and trailing whitespace (whole
        blank lines included) is stripped.
    """
    head = text[: len(text) - len(text.lstrip())].count("\n")
    tail = text[len(text.rstrip()) :].count("\n")
    return codes[head : len(codes) - tail] if tail else codes[head:]


def encode(codes: str) -> str:
    """Run-length encode a code string (``"ppa"`` → ``"p2a1"``).

    Args:
        codes: One code per slice line.

    Returns:
        The runs, each a code and its length; ``""`` for no lines.
    """
    out: list[str] = []
    i = 0
    while i < len(codes):
        j = i
        while j < len(codes) and codes[j] == codes[i]:
            j += 1
        out.append(f"{codes[i]}{j - i}")
        i = j
    return "".join(out)


def decode(runs: object, *, limit: int = 1_000_000) -> str:
    """The code string of :func:`encode`'s output; anything malformed gives ``""``.

    Args:
        runs: The stored runs (any value: a job prepared by an older version has none).
        limit: The most lines decoded (a damaged count cannot allocate gigabytes).

    Returns:
        One code per slice line, at most ``limit``; ``""`` when ``runs`` is not a valid
        encoding (the caller then knows no line's origin).
    """
    if not isinstance(runs, str) or not runs:
        return ""
    parts: list[str] = []
    total = 0
    pos = 0
    for match in _RUN.finditer(runs):
        if match.start() != pos:
            return ""
        pos = match.end()
        count = min(int(match.group(2)), limit - total)
        parts.append(match.group(1) * count)
        total += count
        if total >= limit:
            break
    else:
        if pos != len(runs):
            return ""
    return "".join(parts)
