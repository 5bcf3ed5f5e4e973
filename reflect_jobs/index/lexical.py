"""Lexical BM25 search over the notes with SQLite FTS5 (ARCHITECTURE §8).

Vectors miss exact strings — ``KeyError: 'user_id'``, ``graph_chunk_entity_relation.graphml``,
``ENOENT`` — which is precisely what a developer pastes. This index is the exact-match leg
of hybrid search; it is derived data, so on corruption we :meth:`LexicalIndex.rebuild` and
reindex from the notes.

Tokenizer: ``porter unicode61 remove_diacritics 2`` (the default separators). We do *not*
add ``_ . - /`` as token characters: then ``pnpm.`` at the end of a sentence would be a token
that never matches ``pnpm``, and ``foo_bar`` would not find ``foo_bar.py``. Instead an
identifier is split into its parts at both index and query time and each query term is sent
as a quoted *phrase*, so ``graph_chunk_entity_relation.graphml`` must match the adjacent
tokens ``graph chunk entity relation graphml`` — and its parts still match on their own.
Porter stemming is applied to both sides, so it never breaks an exact match and lets
"failing" find "fails".

Phrases alone cannot tell ``user_id`` from prose saying "the user id", so a third column,
``idents``, holds every compound identifier of the note (``user_id``, ``foo_bar.py``,
``pnpm-lock.yaml``, and each ``/`` component of a path) with its separators removed
(``userid``, ``foobarpy``): one token the tokenizer cannot split. A compound query term also
searches that column, which is weighted high, so the note containing the identifier itself
wins.

Query: every whitespace-separated term becomes a phrase (``"`` doubled), joined with OR, plus
the whole query as one more phrase, so a note containing the exact error string outscores
notes that only share some words. No user character is ever FTS5 syntax, hence no query can
raise a syntax error.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

_TOKENIZER = "porter unicode61 remove_diacritics 2"
_HAS_WORD = re.compile(r"\w")
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_TERMS = 32
MAX_PHRASE_CHARS = 400
# Title matches weigh more: a note *about* X beats one that mentions X in passing; an
# identifier match beats both.
_WEIGHTS = (4.0, 1.0, 10.0)
_COMPOUND = re.compile(r"\w+(?:[./-]\w+)*")
_SEPARATORS = re.compile(r"[_./-]")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS docs (
    rid INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active'
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(title, body, idents, tokenize='{_TOKENIZER}');
"""


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


class LexicalIndex:
    """One SQLite file (``kb/index/lexical.db``) holding an FTS5 table and document metadata."""

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        """Open or create the index (and its directory).

        A corrupt file does not raise here — :meth:`check` then reports False and
        :meth:`rebuild` recreates it — so callers can always recover.

        Args:
            db_path: The SQLite file, usually ``kb/index/lexical.db``.
        """
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = self._connect()
        self._broken = False
        try:
            self._init_schema()
        except sqlite3.DatabaseError:
            self._broken = True

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=30.0)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    def _init_schema(self) -> None:
        # WAL lets a search run while a reindex writes. synchronous=NORMAL: in WAL mode a
        # power cut can lose the last commits but never corrupts the file, and this index is
        # rebuilt from the notes anyway (the notes themselves are fsynced).
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection (checkpoints the WAL)."""
        self._conn.close()

    def __enter__(self) -> LexicalIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def upsert(
        self,
        doc_id: str,
        *,
        title: str,
        body: str,
        path: str,
        content_hash: str,
        status: str = "active",
    ) -> None:
        """Insert or replace one document (metadata and text in one transaction).

        Args:
            doc_id: The note's id (the key).
            title: The note's title (weighted above the body).
            body: The text to index.
            path: The note file, returned by :meth:`lookup`.
            content_hash: The note's sha256, compared by incremental reindex.
            status: The note's status; only ``active`` and ``proposed`` documents are found
                by default (search marks the proposed ones).
        """
        self.upsert_many(
            [
                {
                    "doc_id": doc_id,
                    "title": title,
                    "body": body,
                    "path": path,
                    "content_hash": content_hash,
                    "status": status,
                }
            ]
        )

    def upsert_many(self, docs: Iterable[Mapping[str, str]]) -> int:
        """Upsert many documents in ONE transaction.

        A reindex of thousands of notes would otherwise pay one commit each.

        Args:
            docs: Mappings with the keys of :meth:`upsert` (``doc_id``, ``title``, ``body``,
                ``path``, ``content_hash``, and optionally ``status``, default active).

        Returns:
            The number of documents written.

        Raises:
            KeyError: A mapping lacks a required key (nothing is written then).
        """
        count = 0
        with self._conn:
            for doc in docs:
                self._upsert_one(
                    doc["doc_id"],
                    title=_clean(doc["title"]),
                    body=_clean(doc["body"]),
                    path=doc["path"],
                    content_hash=doc["content_hash"],
                    status=doc.get("status", "active"),
                )
                count += 1
        return count

    def _upsert_one(
        self, doc_id: str, *, title: str, body: str, path: str, content_hash: str, status: str
    ) -> None:
        row = self._conn.execute("SELECT rid FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()
        if row:
            rid = row[0]
            self._conn.execute("DELETE FROM docs_fts WHERE rowid = ?", (rid,))
            self._conn.execute(
                "UPDATE docs SET title=?, path=?, content_hash=?, status=? WHERE rid=?",
                (title, path, content_hash, status, rid),
            )
        else:
            cur = self._conn.execute(
                "INSERT INTO docs (doc_id, title, path, content_hash, status) VALUES (?, ?, ?, ?, ?)",
                (doc_id, title, path, content_hash, status),
            )
            rid = cur.lastrowid
        self._conn.execute(
            "INSERT INTO docs_fts (rowid, title, body, idents) VALUES (?, ?, ?, ?)",
            (rid, title, body, " ".join(identifiers(f"{title}\n{body}"))),
        )

    def remove(self, doc_id: str) -> None:
        """Forget a document (no-op if absent).

        Args:
            doc_id: The note's id.
        """
        with self._conn:
            row = self._conn.execute("SELECT rid FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()
            if row:
                self._conn.execute("DELETE FROM docs_fts WHERE rowid = ?", (row[0],))
                self._conn.execute("DELETE FROM docs WHERE rid = ?", (row[0],))

    def set_status(self, doc_id: str, status: str) -> bool:
        """Change one document's status only (its text and hash stay).

        A person's ``forget`` takes a learning out of search at once this way; the next
        reindex sees its note gone from ``documents/`` and removes it for good (with its
        vectors), since its hash is still the one the index knew.

        Args:
            doc_id: The note's id.
            status: The new status (a retired one hides it from every search).

        Returns:
            True when the document was indexed.
        """
        with self._conn:
            cur = self._conn.execute(
                "UPDATE docs SET status = ? WHERE doc_id = ?", (status, doc_id)
            )
        return cur.rowcount > 0

    def indexed_hashes(self) -> dict[str, str]:
        """``doc_id -> content_hash`` so a reindex touches only changed notes.

        Returns:
            The hash of every indexed document, whatever its status.
        """
        return dict(self._conn.execute("SELECT doc_id, content_hash FROM docs"))

    def lookup(self, doc_id: str) -> dict[str, str] | None:
        """Title, path and status of a document, for ``search --json`` output.

        Args:
            doc_id: The note's id.

        Returns:
            ``{"title", "path", "status"}``, or ``None`` when it is not indexed.
        """
        row = self._conn.execute(
            "SELECT title, path, status FROM docs WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        return None if row is None else {"title": row[0], "path": row[1], "status": row[2]}

    def search(
        self, query: str, k: int = 10, *, include_retired: bool = False
    ) -> list[tuple[str, float]]:
        """``[(doc_id, score)]`` best first; score is ``-bm25`` (higher is better).

        Retired notes are filtered here, not by the caller, so no search path can leak them.

        Args:
            query: Free text (see :func:`build_match`); no input is FTS5 syntax.
            k: At most this many results; 0 or less returns none.
            include_retired: Also return retired documents (``active`` and ``proposed`` ones
                are always returned).

        Returns:
            ``(doc_id, score)`` pairs, best first (ties by id); empty when the query has
            nothing searchable.
        """
        match = build_match(query)
        if match is None or k <= 0:
            return []
        rows = self._conn.execute(
            f"""
            SELECT d.doc_id, bm25(docs_fts, {", ".join(map(str, _WEIGHTS))}) AS r
            FROM docs_fts JOIN docs d ON d.rid = docs_fts.rowid
            WHERE docs_fts MATCH ? AND (? OR d.status IN ('active', 'proposed'))
            ORDER BY r, d.doc_id LIMIT ?
            """,
            (match, int(include_retired), int(k)),
        ).fetchall()
        return [(doc_id, -float(rank)) for doc_id, rank in rows]

    def check(self) -> bool:
        """True if the database and the FTS index are intact and agree with the metadata.

        Returns:
            ``False`` when the file could not be opened as an index, SQLite's quick check or
            FTS5's integrity check fails, or the FTS table and the metadata hold different
            numbers of rows.
        """
        if self._broken:
            return False
        try:
            if self._conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return False
            self._conn.execute("INSERT INTO docs_fts(docs_fts) VALUES ('integrity-check')")
            docs = self._conn.execute("SELECT count(*) FROM docs").fetchone()[0]
            fts = self._conn.execute("SELECT count(*) FROM docs_fts").fetchone()[0]
            return bool(docs == fts)
        except sqlite3.DatabaseError:
            return False

    def rebuild(self) -> None:
        """Delete the database file (and its WAL/SHM) and start empty.

        Dropping tables is not enough when the file itself is damaged; the index is derived
        from the notes, so the caller follows this with a full reindex.
        """
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.db_path}{suffix}")
        self._conn = self._connect()
        self._init_schema()
        self._broken = False
