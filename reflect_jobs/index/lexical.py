"""Lexical BM25 search over the notes with SQLite FTS5 (ARCHITECTURE §8).

Vectors miss exact strings — ``KeyError: 'user_id'``, ``graph_chunk_entity_relation.graphml``,
``ENOENT`` — which is precisely what a developer pastes. This index is the exact-match leg
of hybrid search; it is derived data, so on corruption we :meth:`LexicalIndex.rebuild` and
reindex from the notes.

Tokenizer: ``porter unicode61 remove_diacritics 2`` (the default separators): porter stemming
on both sides lets "failing" find "fails" and never breaks an exact match. What the query
*means* is decided before FTS5 sees it, by :mod:`.tokens` (code-aware, stop words dropped):

* columns ``title``, ``rule`` (the rule and key insight), ``body`` (the rest of the note) and
  ``idents`` (every compound identifier with its separators removed — ``userid``,
  ``foobarpy``, ``testjsservetestts`` — and the camelCase parts, which unicode61 cannot
  split), weighted by :data:`WEIGHTS` so a note *about* X beats one that mentions X in
  passing, and the note holding an identifier itself beats prose sharing its parts;
* the query is an ``OR`` of its meaningful words (each a quoted token) and its squashed
  identifiers (``idents : "…"``). BM25 sums the IDF of what matched, so a note matching the
  rare words of the query outscores one matching a common word. A query of only stop words or
  punctuation builds nothing and returns nothing. No user character is ever FTS5 syntax.
* :meth:`LexicalIndex.search` can exclude documents (another repository's learnings) *inside*
  the query, before the top ``k`` are taken, and reports each hit's *coverage*: the
  IDF-weighted share of the query's terms the document matches, which the relevance floor of
  :mod:`.search` reads (BM25 itself has no scale to put a floor on).

A file written by an older version (three columns, ``user_version`` 0) is still searched, with
its own weights, and reports itself outdated so the next reindex rebuilds it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import fts_query, tokens
from .fts_query import _clean, query_match

_TOKENIZER = "porter unicode61 remove_diacritics 2"
#: BM25 column weights (title, rule, body, idents): tuned on the recall benchmark's dev split.
WEIGHTS = (4.0, 3.0, 1.0, 6.0)
_LEGACY_WEIGHTS = (4.0, 1.0, 10.0)
#: Added to every term's IDF in the coverage: in a small or one-topic KB every term is common
#: (IDF near 0) and the share of matched terms, not noise in tiny IDFs, must decide.
COVERAGE_SMOOTHING = 0.5
#: A hit matching one plain word of a query of at least this many terms is a chance match.
LONE_PARTS = 3
#: ``PRAGMA user_version`` of the current layout; an older file is rebuilt by the next reindex.
SCHEMA_VERSION = 2

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS docs (
    rid INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active'
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    title, rule, body, idents, tokenize='{_TOKENIZER}'
);
"""


@dataclass(frozen=True)
class LexicalHit:
    """One lexical hit: the note, its ``-bm25`` score and its coverage of the query.

    ``lone`` (with coverage) says the note matched only one of a query's three or more
    terms, and that term is a plain word: a chance match (``systemd unit`` for "write a
    unit test"), which the relevance floor of :mod:`.search` does not let pass on coverage.
    """

    doc_id: str
    score: float
    coverage: float
    lone: bool = False


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
        self.outdated = False
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
        columns = [r[1] for r in self._conn.execute("PRAGMA table_info(docs_fts)")]
        if columns and "rule" not in columns:
            # A file from before the rule column: still searched (legacy weights), rebuilt by
            # the next reindex (indexed_hashes says so).
            self.outdated = True
            return
        self._conn.executescript(_SCHEMA)
        if self._conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

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
        rule: str = "",
    ) -> None:
        """Insert or replace one document (metadata and text in one transaction).

        Args:
            doc_id: The note's id (the key).
            title: The note's title (weighted above the body).
            body: The text to index.
            rule: The note's rule and key insight (weighted between title and body).
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
                    "rule": rule,
                }
            ]
        )

    def upsert_many(self, docs: Iterable[Mapping[str, str]]) -> int:
        """Upsert many documents in ONE transaction.

        A reindex of thousands of notes would otherwise pay one commit each.

        Args:
            docs: Mappings with the keys of :meth:`upsert` (``doc_id``, ``title``, ``body``,
                ``path``, ``content_hash``, and optionally ``status``, default active, and
                ``rule``).

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
                    rule=_clean(doc.get("rule", "")),
                )
                count += 1
        return count

    def _upsert_one(
        self,
        doc_id: str,
        *,
        title: str,
        body: str,
        path: str,
        content_hash: str,
        status: str,
        rule: str = "",
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
        if self.outdated:
            raise sqlite3.DatabaseError("the lexical index predates this version: reindex --force")
        self._conn.execute(
            "INSERT INTO docs_fts (rowid, title, rule, body, idents) VALUES (?, ?, ?, ?, ?)",
            (rid, title, rule, body, tokens.index_text(f"{title}\n{rule}\n{body}")),
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

        Raises:
            sqlite3.DatabaseError: The file is damaged or predates this layout (the
                reindex then rebuilds it from the notes).
        """
        if self.outdated:
            raise sqlite3.DatabaseError("the lexical index predates this version")
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

    def size(self) -> int:
        """How many documents the index holds (what the relevance floor is sized by).

        Returns:
            The count of indexed documents, any status.
        """
        return int(self._conn.execute("SELECT count(*) FROM docs").fetchone()[0])

    def rule_of(self, doc_id: str) -> str:
        """A document's rule (its ``rule`` column), ``""`` when it has none or is unknown.

        Args:
            doc_id: The note's id.

        Returns:
            The rule text as indexed.
        """
        if self.outdated:
            return ""  # a file from before the rule column (rebuilt by the next reindex)
        row = self._conn.execute(
            "SELECT f.rule FROM docs d JOIN docs_fts f ON f.rowid = d.rid WHERE d.doc_id = ?",
            (doc_id,),
        ).fetchone()
        return str(row[0] or "") if row else ""

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        include_retired: bool = False,
        exclude: Collection[str] = (),
    ) -> list[tuple[str, float]]:
        """``[(doc_id, score)]`` best first; score is ``-bm25`` (higher is better).

        Retired notes are filtered here, not by the caller, so no search path can leak them.

        Args:
            query: Free text (see :func:`.fts_query.query_match`); no input is FTS5 syntax.
            k: At most this many results; 0 or less returns none.
            include_retired: Also return retired documents (``active`` and ``proposed`` ones
                are always returned).
            exclude: Document ids never to return, filtered *before* the top ``k`` are taken
                (a scoped search excludes the other repositories' learnings).

        Returns:
            ``(doc_id, score)`` pairs, best first (ties by id); empty when the query has
            nothing searchable.
        """
        return [
            (h.doc_id, h.score)
            for h in self.scored(query, k, include_retired=include_retired, exclude=exclude)
        ]

    def scored(
        self,
        query: str,
        k: int = 10,
        *,
        include_retired: bool = False,
        exclude: Collection[str] = (),
        coverage: bool = False,
    ) -> list[LexicalHit]:
        """Like :meth:`search`, with each hit's coverage when asked.

        Args:
            query: Free text.
            k: At most this many results.
            include_retired: Also return retired documents.
            exclude: Document ids never to return (filtered before the top ``k``).
            coverage: Also compute each hit's coverage: the IDF-weighted share of the query's
                terms it matches (one FTS lookup per term; at most 2 × ``tokens.MAX_TERMS``).

        Returns:
            :class:`LexicalHit` best first; ``coverage`` is 0.0 unless asked for.
        """
        match, parts = query_match(query)
        if match is None or k <= 0:
            return []
        weights = _LEGACY_WEIGHTS if self.outdated else WEIGHTS
        rows = self._conn.execute(
            f"""
            SELECT d.doc_id, bm25(docs_fts, {", ".join(map(str, weights))}) AS r, d.rid
            FROM docs_fts JOIN docs d ON d.rid = docs_fts.rowid
            WHERE docs_fts MATCH ? AND (? OR d.status IN ('active', 'proposed'))
              AND d.doc_id NOT IN (SELECT value FROM json_each(?))
            ORDER BY r, d.doc_id LIMIT ?
            """,
            (match, int(include_retired), json.dumps(sorted(exclude)), int(k)),
        ).fetchall()
        hits = [LexicalHit(doc_id, -float(rank), 0.0) for doc_id, rank, _ in rows]
        if not coverage or not hits:
            return hits
        share, lone = self._coverage(parts, [rid for _, _, rid in rows])
        return [LexicalHit(h.doc_id, h.score, share[i], lone[i]) for i, h in enumerate(hits)]

    def _coverage(self, parts: list[str], rids: list[int]) -> tuple[list[float], list[bool]]:
        """The IDF-weighted share of ``parts`` each of ``rids`` matches (same order), and
        whether it matched only one of three or more parts, a plain word (not code)."""
        total = self._conn.execute("SELECT count(*) FROM docs").fetchone()[0] or 1
        wanted = set(rids)
        got = [0.0] * len(rids)
        count = [0] * len(rids)
        code = [False] * len(rids)
        where = {rid: i for i, rid in enumerate(rids)}
        denominator = 0.0
        for part in parts:
            matched = [
                r
                for (r,) in self._conn.execute(
                    "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?", (part,)
                )
            ]
            df = len(matched)
            idf = math.log(1.0 + (total - df + 0.5) / (df + 0.5)) + COVERAGE_SMOOTHING
            denominator += idf
            is_code = fts_query.is_code_part(part)
            for rid in wanted.intersection(matched):
                got[where[rid]] += idf
                count[where[rid]] += 1
                code[where[rid]] |= is_code
        shares = [round(g / denominator, 4) if denominator else 0.0 for g in got]
        lone = [
            len(parts) >= LONE_PARTS and n == 1 and not c for n, c in zip(count, code, strict=True)
        ]
        return shares, lone

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
