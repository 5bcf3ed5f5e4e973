"""Characters a reader does not see: what counts as visible text, and stripping the rest.

A zero-width "note" (U+200B × 40) was accepted as the evidence that closed an item, and
Unicode tag characters (U+E0000–E007F, "ASCII smuggling") and bidi overrides (U+202E) carry
instructions a person reviewing the text cannot see. One definition, stdlib only:

* *invisible*: format characters (Unicode ``Cf``: zero-width space/joiners, bidi controls,
  tag characters, the BOM, soft hyphen…), controls (``Cc``), private-use (``Co``),
  surrogates (``Cs``), unassigned code points (``Cn``), combining marks on their own
  (``Mn``/``Me``: they draw on the character before), whitespace, and the few letters and
  symbols that render blank (Hangul fillers, the braille blank, U+3164…).
* :func:`visible_count`: how many characters of a text a person can actually see.
* :func:`strip_invisible`: the text without the invisible characters that are not ordinary
  whitespace (newlines, tabs and spaces are kept: they are layout, not smuggling).
"""

from __future__ import annotations

import unicodedata

#: Categories whose characters never show as a glyph of their own.
INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Co", "Cs", "Cn", "Mn", "Me"})
#: Letters and symbols that render as blank space although their category says otherwise.
BLANK_LOOKALIKES = frozenset(
    {
        "\u115f",  # HANGUL CHOSEONG FILLER
        "\u1160",  # HANGUL JUNGSEONG FILLER
        "\u3164",  # HANGUL FILLER
        "\uffa0",  # HALFWIDTH HANGUL FILLER
        "\u2800",  # BRAILLE PATTERN BLANK
        "\u180e",  # MONGOLIAN VOWEL SEPARATOR (Cf in some versions, Zs in others)
    }
)
#: Whitespace a text may keep (layout, not hiding).
_LAYOUT = frozenset(" \t\n\r")

__all__ = [
    "BLANK_LOOKALIKES",
    "INVISIBLE_CATEGORIES",
    "is_visible",
    "strip_invisible",
    "visible_count",
]


def is_visible(ch: str) -> bool:
    """Whether one character shows as something a reader sees.

    Args:
        ch: One character.

    Returns:
        False for whitespace, the :data:`INVISIBLE_CATEGORIES` and :data:`BLANK_LOOKALIKES`.
    """
    if ch.isspace() or ch in BLANK_LOOKALIKES:
        return False
    return unicodedata.category(ch) not in INVISIBLE_CATEGORIES


def visible_count(text: str) -> int:
    """How many characters of ``text`` a person can see (a note's "length" as read).

    Args:
        text: Any text.

    Returns:
        The number of visible characters (:func:`is_visible`).
    """
    return sum(1 for ch in text if is_visible(ch))


def strip_invisible(text: str) -> str:
    """``text`` without the characters that hide: format, control, private-use, blank
    look-alikes; spaces, tabs and newlines are kept, and so are combining marks that follow
    a visible character (accents written decomposed).

    Args:
        text: Any text.

    Returns:
        The cleaned text.
    """
    if text.isascii():  # the common case, in C: a model's 5 MB field took 6 s per char
        return text.translate(_ASCII_TABLE)
    return _strip(text)


def _strip(text: str) -> str:
    out: list[str] = []
    prev_visible = False
    for ch in text:
        if ch in _LAYOUT:
            out.append(ch)
            prev_visible = False
            continue
        cat = unicodedata.category(ch)
        if cat in ("Mn", "Me"):
            if prev_visible:
                out.append(ch)
            continue
        if ch in BLANK_LOOKALIKES or cat in INVISIBLE_CATEGORIES:
            continue
        if ch.isspace():
            out.append(" ")  # an exotic space is a space
            prev_visible = False
            continue
        out.append(ch)
        prev_visible = True
    return "".join(out)


#: What :func:`_strip` does to each ASCII character (no combining marks there, so each one
#: is decided alone): the controls other than layout are dropped.
_ASCII_TABLE = {c: kept or None for c in range(128) if (kept := _strip(chr(c))) != chr(c)}
