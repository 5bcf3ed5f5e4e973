"""The reflection index's SQLite schema and row decoding (:mod:`.index` is its logic).

Split from :mod:`.index` so that module holds the refresh and the queries: the tables (logs
seen, events, items waiting to be folded again, folded items, their FTS5 twin), the
tokenizer and column weights, and how an ``items`` row becomes an
:class:`~reflect_jobs.reflections.fold.Item`.

Schema 3: an event id is the key of ``events`` within a repository (a reuse in another log
is ignored and counted), ``dirty`` makes a refresh resumable in bounded transactions, the
per-log counters say what a log held that was not folded, and the file is created with
``auto_vacuum = INCREMENTAL`` so it can give space back when logs shrink.
"""

from __future__ import annotations

import json
from typing import Any

from .fold import Item

#: 2: rows keyed by the repository's key (``github.com/acme/shop``, ``reflect_jobs/repo.py``)
#: instead of its memory home's directory name.
#: 3: events keyed by (repo, eid), the ``dirty`` queue, per-log counters, incremental
#: auto-vacuum, and ``items_open``: the session-start query walks the newest open items in
#: the index alone (issue 24). Any other version is deleted and rebuilt from the logs.
SCHEMA_VERSION = 3
TAIL = 4096
_TOKENIZER = "porter unicode61 remove_diacritics 2"
_WEIGHTS = "4.0, 1.0, 1.0"
_COLUMNS = (
    "uid, id, kind, title, body, base, by, session, host, created_at, updated_at, notes, seen"
)
#: What a host log held that the fold does not use, per log (``reflections doctor``).
COUNTERS = ("bad", "other_host", "reused", "oversize", "future")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS logs (
    repo TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL, offset INTEGER NOT NULL, tail TEXT NOT NULL,
    bad INTEGER NOT NULL DEFAULT 0, other_host INTEGER NOT NULL DEFAULT 0,
    reused INTEGER NOT NULL DEFAULT 0, oversize INTEGER NOT NULL DEFAULT 0,
    future INTEGER NOT NULL DEFAULT 0, events INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (repo, path)
);
CREATE TABLE IF NOT EXISTS events (
    repo TEXT NOT NULL, eid TEXT NOT NULL, path TEXT NOT NULL, uid TEXT NOT NULL,
    ts TEXT NOT NULL, op TEXT NOT NULL, host TEXT NOT NULL, seen TEXT NOT NULL,
    line TEXT NOT NULL, PRIMARY KEY (repo, eid)
);
CREATE INDEX IF NOT EXISTS events_uid ON events (repo, uid);
CREATE INDEX IF NOT EXISTS events_path ON events (repo, path);
CREATE TABLE IF NOT EXISTS dirty (
    repo TEXT NOT NULL, uid TEXT NOT NULL, PRIMARY KEY (repo, uid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
    rid INTEGER PRIMARY KEY, repo TEXT NOT NULL, uid TEXT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, base TEXT NOT NULL,
    by TEXT NOT NULL, session TEXT, host TEXT NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, notes TEXT NOT NULL, seen TEXT NOT NULL DEFAULT '',
    UNIQUE (repo, uid)
);
CREATE INDEX IF NOT EXISTS items_open ON items (repo, base, created_at, uid, kind, by, updated_at);
CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(title, body, notes, tokenize='{_TOKENIZER}');
"""


def _row_item(row: tuple[Any, ...]) -> Item:
    uid, id_, kind, title, body, base, by, session, host, created, updated, notes, seen = row
    return Item(
        uid=uid,
        id=id_,
        kind=kind,
        title=title,
        body=body,
        base=base,
        by=by,
        session=session,
        host=host,
        created_at=created,
        updated_at=updated,
        notes=json.loads(notes),
        seen=seen,
    )
