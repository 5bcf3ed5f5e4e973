"""Code-aware tokens for search and recall: the words of a query or a note that carry meaning.

A developer's query mixes prose with code: ``test/js/bun/http/serve.test.ts``,
``try/except``, ``getUserName``, ``graph_chunk_entity_relation.graphml``, ``KeyError``.
A prose tokenizer turns a path into one phrase no note contains and ORs in "the", "for" and
"how", so every query matches nearly every note. Here:

* a *compound identifier* (word runs joined by ``. / \\ : -`` or containing ``_``) is kept
  whole (lower-cased, as written) **and** split into its parts;
* every word run is also split at camelCase and letter/digit boundaries
  (``getUserName`` → ``get user name``; ``HTTPServer`` → ``http server``; ``e2e`` and
  ``B950`` stay whole, and so do names such as ``GitHub``: :data:`WHOLE_NAMES`);
* English stop words and single letters are dropped (digits stay: ``0 test projects``).

Pure and standard-library only: the hook path (per-prompt recall) imports it, and so do the
lexical index (index and query side alike, so both see the same terms) and the benchmark.
Every function is bounded by its input, and :func:`query_terms` by :data:`MAX_QUERY_CHARS`
and :data:`MAX_TERMS`, so a 100 KB pasted prompt costs no more than its first few KB.
"""

from __future__ import annotations

import re

#: A query is read up to here; the rest of a pasted log adds noise, not meaning.
MAX_QUERY_CHARS = 2000
#: At most this many distinct terms of a query (words and identifiers each).
MAX_TERMS = 32
#: A single token longer than this is a hash, a blob or base64, not a word anyone searches.
MAX_TOKEN_CHARS = 64

#: The one stop-word list (search, the lexical index's queries and per-prompt recall all read
#: it): English function words, question filler and a prompt's conversational words
#: ("please", "thanks", "something", "actually"). They occur in almost every note or prompt,
#: so matching them says nothing about relevance (BM25 gives them some weight all the same).
#: Contractions are split at the apostrophe by the word pattern, so their stems are here too
#: ("don't" → ``don``; the single letter ``t`` is dropped anyway).
_STOP_TEXT = """
    a about above actually after again against all also always am an and another any anything
    are as at be because been before being below between both but by can cannot could did do
    does doing done down during each either else etc even ever every few for from further get
    gets getting got had has have having he her here hers herself hey hi him himself his how i
    if in into is it its itself just least less let lets like ll make makes may maybe me might
    more most much must my myself need needs never new no nor not now of off ok okay on once
    one only or other ought our ours ourselves out over own per please quite rather re really
    same shall she should since so some something still stuff such sure than thank thanks that
    the their theirs them themselves then there these they thing things this those though
    through thus to too two under until up upon us use used uses using very via want wants was
    way ways we were what whatever when where whether which while who whom whose why will with
    within without would yeah yes yet you your yours yourself yourselves
    aren couldn didn doesn don hadn hasn haven isn mustn shouldn ve wasn weren won wouldn
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

#: Camel-cased names whose parts are other words: "GitHub" is not about ``git``, nor
#: "JavaScript" about ``java`` or "macOS" about ``mac``. Split, a prompt naming GitHub matched
#: every git learning on "git". Kept whole (the note side's full-text tokenizer never splits
#: them either); in an identifier it is one part (``GitHubClient`` → ``github client``).
_WHOLE_TEXT = """
    github gitlab javascript typescript coffeescript actionscript macos ios ipados watchos
    tvos iphone ipad postgresql mysql sqlite graphql nosql mongodb couchdb dynamodb redis
    oauth openid openai openapi youtube linkedin wordpress woocommerce pytorch tensorflow
    numpy scipy fastapi devops gitops mlops nodejs nextjs nuxtjs powershell webassembly
    webgl webgpu websocket websockets dotnet aspnet onedrive sharepoint bitbucket
"""
WHOLE_NAMES = frozenset(_WHOLE_TEXT.split())

WORD = re.compile(r"\w+")

# Word runs joined by path, module, namespace or kebab separators: next.js, try/except,
# foo_bar.py, std::sync::Mutex, pnpm-lock.yaml, C:\Users\x.
_COMPOUND = re.compile(r"\w+(?:(?:::|[./\\:-])\w+)*")
_SEPARATORS = re.compile(r"::|[_./\\:-]")
# camelCase / PascalCase / ACRONYMWord / digits: getUserName, HTTPServer, parseJSON2, B950.


def split_word(word: str) -> list[str]:
    """The lower-cased parts of one word run at camelCase and snake_case boundaries.

    Args:
        word: A run of word characters (``getUserName``, ``user_id``, ``B950``, ``größe``).

    Returns:
        Its parts in order (``["get", "user", "name"]``); a word with no boundary gives
        itself, lower-cased.
    """
    parts: list[str] = []
    for piece in word.split("_"):
        parts += _names_whole([p.lower() for p in _camel(piece)])
    return parts


def _names_whole(parts: list[str]) -> list[str]:
    """Camel parts with each pair that spells one of :data:`WHOLE_NAMES` joined again
    (``git hub client`` → ``github client``)."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        if i + 1 < len(parts) and parts[i] + parts[i + 1] in WHOLE_NAMES:
            out.append(parts[i] + parts[i + 1])
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return out


def _camel(piece: str) -> list[str]:
    """Split at a case change (``getUser``, ``HTTPServer``, ``größeWert``), any script.

    Digits stay with their letters, so ``e2e``, ``B950``, ``utf8`` and ``sha256`` stay whole.
    """
    out: list[str] = []
    start = 0
    for i in range(1, len(piece)):
        prev, cur = piece[i - 1], piece[i]
        nxt = piece[i + 1] if i + 1 < len(piece) else ""
        if (cur.isupper() and (prev.islower() or prev.isdigit())) or (
            cur.isupper() and prev.isupper() and nxt.islower()
        ):
            out.append(piece[start:i])
            start = i
    if start < len(piece):
        out.append(piece[start:])
    return out


def squash(identifier: str) -> str:
    """An identifier with its separators removed, lower-cased (``foo_bar.py`` → ``foobarpy``).

    The lexical index stores this form in a column the FTS tokenizer cannot split, so a query
    naming the identifier matches the note holding it, not prose that shares its parts.

    Args:
        identifier: A compound identifier as written.

    Returns:
        The separator-free lower-cased form.
    """
    return _SEPARATORS.sub("", identifier).lower()


def _keep(term: str) -> bool:
    if not term or len(term) > MAX_TOKEN_CHARS or term in STOP_WORDS:
        return False
    return len(term) > 1 or term.isdigit()


def identifiers(text: str) -> list[str]:
    """Compound identifiers in ``text``, as written but lower-cased, de-duplicated in order.

    Each path component of a compound is one too (``qux.py`` of ``baz/qux.py``), and so is a
    camelCase word (``getUserName``), which has parts but no separator.

    Args:
        text: Any text (a note or a query).

    Returns:
        ``["test/js/serve.test.ts", "serve.test.ts", "getusername", ...]`` — plain words are
        left out.
    """
    out: dict[str, None] = {}
    for match in _COMPOUND.findall(text):
        pieces = [match, *re.split(r"[/\\]", match)] if ("/" in match or "\\" in match) else [match]
        for piece in pieces:
            if len(piece) > 4 * MAX_TOKEN_CHARS:
                continue
            if _SEPARATORS.search(piece) or len(split_word(piece)) > 1:
                out[piece.lower()] = None
    return list(out)


def words(text: str) -> list[str]:
    """Every meaningful lower-cased word of ``text``: each word run and its parts.

    ``getUserName`` gives ``getusername``, ``get``, ``user``, ``name``; ``try/except`` gives
    ``try`` and ``except``; stop words and single letters are dropped.

    Args:
        text: Any text.

    Returns:
        The words, de-duplicated in first-seen order.
    """
    out: dict[str, None] = {}
    for run in WORD.findall(text):
        whole = run.lower()
        if _keep(whole):
            out[whole] = None
        parts = split_word(run)
        if len(parts) > 1:
            for part in parts:
                if _keep(part):
                    out[part] = None
    return list(out)


class QueryTerms:
    """What a query asks for: its meaningful words and its compound identifiers (squashed).

    A plain value class, not a dataclass: both recall hooks import this module, and
    ``dataclasses`` imports ``inspect`` — a tenth of a bare interpreter's start.
    """

    __slots__ = ("idents", "words")

    def __init__(self, words: tuple[str, ...], idents: tuple[str, ...]) -> None:
        """Hold the terms.

        Args:
            words: The meaningful words.
            idents: The compound identifiers, squashed.
        """
        self.words = words
        self.idents = idents

    def __bool__(self) -> bool:
        return bool(self.words or self.idents)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QueryTerms):
            return NotImplemented
        return (self.words, self.idents) == (other.words, other.idents)

    def __hash__(self) -> int:
        return hash((self.words, self.idents))

    def __repr__(self) -> str:
        return f"QueryTerms(words={self.words!r}, idents={self.idents!r})"


def query_terms(query: str) -> QueryTerms:
    """The bounded, code-aware terms of a query (empty for stop words or punctuation only).

    Args:
        query: Free text; only its first :data:`MAX_QUERY_CHARS` characters are read.

    Returns:
        At most :data:`MAX_TERMS` words and :data:`MAX_TERMS` squashed identifiers.
    """
    text = str(query)[:MAX_QUERY_CHARS]
    idents = [squash(i) for i in identifiers(text)]
    idents = [i for i in dict.fromkeys(idents) if _keep(i)]
    return QueryTerms(tuple(words(text)[:MAX_TERMS]), tuple(idents[:MAX_TERMS]))


def index_text(text: str) -> str:
    """The extra searchable text of a note: identifiers squashed, and camelCase parts.

    The FTS tokenizer splits ``user_id`` into ``user id`` by itself but keeps
    ``getUserName`` as one token; this gives it the squashed identifiers
    (``userid``, ``getusername``) and the camel parts (``get user name``) too.

    Args:
        text: A note's title, rule and body.

    Returns:
        Space-separated terms.
    """
    extra: dict[str, None] = {}
    for ident in identifiers(text):
        extra[squash(ident)] = None
    for run in WORD.findall(text):
        parts = split_word(run)
        if len(parts) > 1 and "_" not in run:
            for part in parts:
                extra[part] = None
    return " ".join(extra)
