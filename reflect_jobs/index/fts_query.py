"""What a lexical query becomes in FTS5 syntax: quoted phrases, never the user's operators.

Split from :mod:`.lexical` (the index itself): the notes' index and the reflection index
(``reflections/index.py``, ``reflections/memories.py``) build their MATCH expressions here,
so no user character is ever FTS5 syntax on either. :func:`query_match` is the notes' query
(the code-aware terms of :mod:`.tokens`, each a phrase, and its identifiers in the ``idents``
column); :func:`build_match` the older whole-text form the reflection index reads.
"""

from __future__ import annotations

import re

from . import tokens

_HAS_WORD = re.compile(r"\w")
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_TERMS = 32
MAX_PHRASE_CHARS = 400
_COMPOUND = re.compile(r"\w+(?:[./-]\w+)*")
_SEPARATORS = re.compile(r"[_./-]")


def _clean(text: str) -> str:
    """Drop NULs and lone surrogates: sqlite3 cannot bind them, and they carry no meaning."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", " "))


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def identifiers(text: str) -> list[str]:
    """Compound identifiers in ``text`` with separators removed (``foo_bar.py`` → ``foobarpy``).

    Each ``/`` component of a path is added too, so ``qux.py`` finds ``baz/qux.py``.

    Args:
        text: Any text (a note's title and body, or a query).

    Returns:
        The lower-cased, separator-free forms of every word run joined by ``.``, ``/`` or
        ``-`` or containing ``_`` (plain words are left out), de-duplicated in first-seen
        order.
    """
    out: dict[str, None] = {}
    for match in _COMPOUND.findall(text):
        pieces = [match, *match.split("/")] if "/" in match else [match]
        for piece in pieces:
            if _SEPARATORS.search(piece):
                out[_SEPARATORS.sub("", piece).lower()] = None
    return list(out)


def build_match(query: str, *, idents: bool = True) -> str | None:
    """FTS5 MATCH expression for free text, or None if it has nothing searchable.

    Args:
        query: The user's text; NULs and lone surrogates are cleaned first.
        idents: Add the ``idents`` column phrases; ``False`` for a table without that
            column (the reflection index), where naming it is an SQL error.

    Returns:
        An ``OR`` of quoted phrases: the whole query (when it has several terms), each
        distinct term (at most :data:`MAX_TERMS`, each cut to :data:`MAX_PHRASE_CHARS`), and
        an ``idents`` phrase per compound identifier; ``None`` when no term holds a word
        character.
    """
    terms = [t for t in _clean(str(query)).split() if _HAS_WORD.search(t)][:MAX_TERMS]
    if not terms:
        return None
    phrases = [_phrase(t[:MAX_PHRASE_CHARS]) for t in dict.fromkeys(terms)]
    if len(terms) > 1:
        phrases.insert(0, _phrase(" ".join(terms)[:MAX_PHRASE_CHARS]))
    if idents:
        phrases += [f"idents : {_phrase(i)}" for i in identifiers(" ".join(terms))[:MAX_TERMS]]
    return " OR ".join(phrases)


def is_code_part(part: str) -> bool:
    """Whether one term of :func:`query_match` is code: an identifier (``idents : …``) or a
    word with a separator or a digit (``user_id``, ``e2e``, ``b950``) — one such term
    matched is evidence; one plain word matched of several is chance.

    Args:
        part: One sub-expression :func:`query_match` returned.

    Returns:
        True for a code term.
    """
    if part.startswith("idents"):
        return True
    return any(c in part for c in "_./:\\-") or any(c.isdigit() for c in part)


def query_match(query: str) -> tuple[str | None, list[str]]:
    """The FTS5 MATCH expression of a query, and its terms one by one.

    Args:
        query: Free text (bounded and tokenised by :func:`.tokens.query_terms`).

    Returns:
        ``(expression, terms)``: an ``OR`` of each meaningful word (a quoted token) and each
        squashed identifier (``idents : "…"``), and those same sub-expressions as a list (for
        :meth:`LexicalIndex.search`'s coverage); ``(None, [])`` when the query holds nothing
        to search (stop words, punctuation, nothing).
    """
    terms = tokens.query_terms(_clean(str(query)))
    parts = [_phrase(w) for w in terms.words]
    parts += [f"idents : {_phrase(i)}" for i in terms.idents if i not in terms.words]
    if not parts:
        return None, []
    return " OR ".join(parts), parts
