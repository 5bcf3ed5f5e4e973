"""The context store's schema and its upgrades (``recall/store.py``; stdlib only).

Kept apart from the readers and writers: the columns a row has, the SQL that makes the
tables, and how a store written by an older version is brought to this one (a store is
derived data: an upgrade adds the missing columns empty and has the next reindex refill it).
"""

from __future__ import annotations

import sqlite3

#: 2: ``anchors``; 3: ``applies_to`` (what a learning is about, ``recall/stack.py``);
#: 4: ``confirmations`` and ``awake_ts`` (usage and fading, ``recall/fading.py``);
#: 5: ``pending_global`` (a global learning told only in its repository until a second
#: session confirms it, what ``status`` counted without reading every note); 6: without it
#: again — the ledger holds it (``learnings.proposed_scope``, migration 0012), so ``status``
#: and ``review`` ask the ledger and no reader of the store needed the flag; 7:
#: ``applies_when`` (the tasks a learning matters in, ``writer/prompt.py``), in the full-text
#: table too, so a prompt naming the task finds it (``recall/relevance.py``).
SCHEMA_VERSION = "7"
COLUMNS = (
    "id",
    "scope",
    "repo_key",
    "title",
    "rule",
    "key_insight",
    "category",
    "path",
    "proof_count",
    "confidence",
    "updated_ts",
    "content_hash",
    "anchors",
    "applies_to",
    "confirmations",
    "awake_ts",
    "applies_when",
)
#: The full-text table's columns (``recall/relevance.py`` weighs each: FIELD_WEIGHT).
FTS_COLUMNS = ("title", "rule", "key_insight", "applies_when")
#: Columns added after schema 1, with their SQL type and default: an older store gets them
#: empty and is refilled (:func:`upgrade`); a reader of an unupgraded store reads the default.
ADDED = {
    "anchors": ("TEXT", "''"),
    "applies_to": ("TEXT", "''"),
    "confirmations": ("INTEGER", "0"),
    "awake_ts": ("REAL", "0"),
    "applies_when": ("TEXT", "''"),
}
#: Columns a store of an older schema has that this one dropped (schema 6: ``pending_global``
#: and its partial index ``notes_pending``); :func:`upgrade` drops them, no refill needed.
DROPPED = {"pending_global": "notes_pending"}
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    repo_key TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL,
    rule TEXT NOT NULL DEFAULT '',
    key_insight TEXT NOT NULL DEFAULT '',
    category TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL DEFAULT '',
    proof_count INTEGER NOT NULL DEFAULT 1,
    confidence REAL NOT NULL DEFAULT 0.6,
    updated_ts REAL NOT NULL DEFAULT 0,
    strength REAL NOT NULL DEFAULT 0,
    content_hash TEXT NOT NULL DEFAULT '',
    anchors TEXT NOT NULL DEFAULT '',
    applies_to TEXT NOT NULL DEFAULT '',
    confirmations INTEGER NOT NULL DEFAULT 0,
    awake_ts REAL NOT NULL DEFAULT 0,
    applies_when TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS notes_by_repo ON notes (scope, repo_key, strength DESC);
CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(
    title, rule, key_insight, applies_when, tokenize='porter unicode61 remove_diacritics 2'
);
"""
#: The full-text table as schema 7 makes it (an older one is made again by :func:`upgrade`).
_FTS_SQL = SCHEMA[SCHEMA.index("CREATE VIRTUAL TABLE") :].strip()


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring an older store to this schema and have it refilled.

    Schema 1 lacks ``anchors``, schema 2 ``applies_to``, schema 3 ``confirmations`` and
    ``awake_ts``, schema 6 ``applies_when``: each missing column is added empty and the
    store marked unfilled, so the pass that opened it refills every row from the notes — a
    store is derived data. A full-text table without a column of :data:`FTS_COLUMNS` (FTS5
    cannot add one) is made again, empty, and refilled by the same pass. A schema 5 store's
    ``pending_global`` (and its index) is dropped (:data:`DROPPED`); the rows stay as they
    are. The covering index of the fitting pass is made here (after the
    columns it covers exist).

    Args:
        conn: A writer connection (``store.open_for_write``).
    """
    columns = {r[1] for r in conn.execute("PRAGMA table_info(notes)")}
    missing = [c for c in ADDED if c not in columns]
    dropped = [c for c in DROPPED if c in columns]
    fts = tuple(r[1] for r in conn.execute("PRAGMA table_info(notes_fts)"))
    refill = bool(missing) or fts != FTS_COLUMNS
    with conn:
        if fts != FTS_COLUMNS:
            conn.execute("DROP TABLE IF EXISTS notes_fts")
            conn.execute(_FTS_SQL)
        for column in missing:
            kind, default = ADDED[column]
            conn.execute(f"ALTER TABLE notes ADD COLUMN {column} {kind} NOT NULL DEFAULT {default}")
        for column in dropped:
            conn.execute(f"DROP INDEX IF EXISTS {DROPPED[column]}")
            conn.execute(f"ALTER TABLE notes DROP COLUMN {column}")
        if refill:
            conn.execute("DELETE FROM meta WHERE key = 'populated'")
        if refill or dropped:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))
        # Covers the session start's pass over the global learnings (recall/relevance.py):
        # read in the index alone, strongest first, without touching a row.
        # (``notes_fit`` before schema 4 lacked the fading columns: made again.)
        fit = [r[2] for r in conn.execute("PRAGMA index_info(notes_fit)")]
        if fit and fit[-1] != "awake_ts":
            conn.execute("DROP INDEX notes_fit")
        conn.execute(
            "CREATE INDEX IF NOT EXISTS notes_fit ON notes (scope, strength DESC, id,"
            " applies_to, proof_count, confidence, updated_ts, confirmations, awake_ts)"
        )
