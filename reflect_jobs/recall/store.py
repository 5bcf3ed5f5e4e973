"""The context store: ``$GLOBAL_LEARNINGS_PATH/index/context.db``, read by the hook (stdlib only).

The SessionStart hook must answer in a few milliseconds at 5,000 notes, with no YAML, no
SQLAlchemy and no index stack (ARCHITECTURE §13). So the worker keeps one small SQLite table
of every *active* learning — id, scope, repository key, title, rule, path and the figures
the ranking needs (proof count, confidence, last update) — plus an FTS5 table over title,
rule and key insight for per-prompt recall. The hook runs one indexed query per section.

The worker writes it (:mod:`reflect_jobs.recall.refresh`) whenever the lexical index is
written: after every add, retirement and reindex (they all end in a reindex), and ``reindex
--force`` rebuilds it. WAL mode lets the hook read while a reindex writes; the hook opens it
read-only with a short busy timeout, and a missing, locked or damaged file means "no
context", never a failed session. The file is private (0600): it holds what was learned.
"""

from __future__ import annotations

import os
import sqlite3

from .store_schema import ADDED as _ADDED
from .store_schema import COLUMNS as _COLUMNS
from .store_schema import FTS_COLUMNS as _FTS_COLUMNS
from .store_schema import SCHEMA as _SCHEMA
from .store_schema import SCHEMA_VERSION
from .store_schema import upgrade as _upgrade

FILE_NAME = "context.db"
READ_TIMEOUT_SEC = 0.25


def store_path(kb_root: str | os.PathLike[str]) -> str:
    """Where the context store of a KB lives.

    Args:
        kb_root: The KB root directory.

    Returns:
        ``<kb_root>/index/context.db``.
    """
    return os.path.join(os.fspath(kb_root), "index", FILE_NAME)


def strength(proof_count: int, confidence: float, confirmations: int = 0) -> float:
    """The time-free part of a learning's rank: proof dominates, then confirmations, then
    confidence.

    The stored pre-order of the hook's indexed query (which 60 candidates are read); the
    rank itself is ``recall/block.py:rank_score``, which weighs the same figures.

    Args:
        proof_count: Sources that confirmed it (1 for a new learning).
        confidence: Its confidence in [0, 1].
        confirmations: Confirmations recorded (``ledger/confirmations.py``).

    Returns:
        ``proof_count`` capped at 20, plus a quarter of ``confirmations`` capped at 20, plus
        ``confidence``; stored so the hook's query can order candidates by an index.
    """
    return (
        float(min(max(int(proof_count), 1), 20))
        + 0.25 * float(min(max(int(confirmations or 0), 0), 20))
        + float(confidence)
    )


# --- the writer side (the worker) ----------------------------------------------------------


def open_for_write(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open (creating it 0600, and its directory 0700) the store for the worker.

    Args:
        path: The store's file (see :func:`store_path`).

    Returns:
        A connection in WAL mode with the schema in place.

    Raises:
        sqlite3.DatabaseError: The file exists but is not a usable SQLite database.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)
    conn = sqlite3.connect(path, timeout=30.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_SCHEMA)
    _upgrade(conn)
    with conn:
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
        )
    return conn


def is_populated(conn: sqlite3.Connection) -> bool:
    """Whether a full pass has ever filled the store (a new store needs one).

    Args:
        conn: A writer connection.

    Returns:
        True once :func:`mark_populated` ran on this file.
    """
    row = conn.execute("SELECT value FROM meta WHERE key = 'populated'").fetchone()
    return row is not None


def mark_populated(conn: sqlite3.Connection) -> None:
    """Record that every note has been through the store once.

    Args:
        conn: A writer connection.
    """
    with conn:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('populated', '1')")


def upsert_many(conn: sqlite3.Connection, rows: list[dict]) -> int:
    """Insert or replace learnings (one transaction).

    Args:
        conn: A writer connection.
        rows: Mappings with the keys of :data:`_COLUMNS` (``id``, ``scope``, ``repo_key``,
            ``title``, ``rule``, ``key_insight``, ``category``, ``path``, ``proof_count``,
            ``confidence``, ``updated_ts``, ``content_hash``, ``anchors``: the note's
            anchors as compact JSON, ``""`` for none; ``applies_to``; ``confirmations`` and
            ``awake_ts``, 0 when missing; ``applies_when``, its phrases one a line).

    Returns:
        How many rows were written.
    """
    count = 0
    with conn:
        for row in rows:
            _delete(conn, str(row["id"]))
            # A row without the later columns (older callers) stores their defaults.
            values = [
                row.get(c) or (0 if _ADDED[c][0] != "TEXT" else "") if c in _ADDED else row.get(c)
                for c in _COLUMNS
            ]
            rank = strength(
                int(row["proof_count"]),
                float(row["confidence"]),
                int(row.get("confirmations") or 0),
            )
            cur = conn.execute(
                f"INSERT INTO notes ({', '.join(_COLUMNS)}, strength) "
                f"VALUES ({', '.join('?' for _ in _COLUMNS)}, ?)",
                (*values, rank),
            )
            conn.execute(
                f"INSERT INTO notes_fts (rowid, {', '.join(_FTS_COLUMNS)}) "
                f"VALUES (?, {', '.join('?' for _ in _FTS_COLUMNS)})",
                (cur.lastrowid, *(str(row.get(c) or "") for c in _FTS_COLUMNS)),
            )
            count += 1
    return count


def _delete(conn: sqlite3.Connection, note_id: str) -> None:
    found = conn.execute("SELECT rid FROM notes WHERE id = ?", (note_id,)).fetchone()
    if found:
        conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (found[0],))
        conn.execute("DELETE FROM notes WHERE rid = ?", (found[0],))


def delete_many(conn: sqlite3.Connection, ids: list[str]) -> None:
    """Forget learnings (retired, superseded or gone); unknown ids are ignored.

    Args:
        conn: A writer connection.
        ids: Note ids.
    """
    with conn:
        for note_id in ids:
            _delete(conn, note_id)


def clear(conn: sqlite3.Connection) -> None:
    """Empty the store (``reindex --force`` refills it from every note).

    Args:
        conn: A writer connection.
    """
    with conn:
        conn.execute("DELETE FROM notes")
        conn.execute("DELETE FROM notes_fts")
        conn.execute("DELETE FROM meta WHERE key = 'populated'")


def known_hashes(conn: sqlite3.Connection) -> dict[str, str]:
    """``id -> content_hash`` of every stored learning.

    Args:
        conn: A connection.

    Returns:
        The mapping.
    """
    return dict(conn.execute("SELECT id, content_hash FROM notes"))


# --- the reader side (the hook, the CLI, the MCP server) -----------------------------------


def open_for_read(path: str | os.PathLike[str]) -> sqlite3.Connection | None:
    """Open the store read-only with a short busy timeout, or ``None`` when there is none.

    Args:
        path: The store's file.

    Returns:
        A read-only connection; ``None`` when the file does not exist (no notes yet, or the
        worker never ran).

    Raises:
        sqlite3.Error: The file is locked past :data:`READ_TIMEOUT_SEC` or not a database
            (the hook logs it and prints nothing).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        return None
    uri = "file:" + path.replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=READ_TIMEOUT_SEC, factory=_Reader)
    conn.execute(f"PRAGMA busy_timeout = {int(READ_TIMEOUT_SEC * 1000)}")
    return conn


class _Reader(sqlite3.Connection):
    """A read-only connection that remembers the store's columns (asked once, not per query:
    a session start runs several queries, each needing to know the schema's age)."""

    columns: frozenset[str] | None = None


def _have(conn: sqlite3.Connection) -> frozenset[str]:
    """The ``notes`` table's columns (cached on a reader connection)."""
    cached = getattr(conn, "columns", None)
    if cached is not None:
        return cached
    have = frozenset(r[1] for r in conn.execute("PRAGMA table_info(notes)"))
    if isinstance(conn, _Reader):
        conn.columns = have
    return have


#: What readers get back: every stored column but the content hash (a writer-side detail).
_KEYS = tuple(c for c in _COLUMNS if c != "content_hash")


def _columns(conn: sqlite3.Connection, prefix: str = "") -> str:
    """The reader's column list; a store the worker has not upgraded yet (no ``anchors``,
    no ``applies_to``, no fading columns) reads them at their defaults, so an upgrade never
    silences the block."""
    have = _have(conn)
    default = {k: v[1] for k, v in _ADDED.items()}
    return ", ".join(
        f"{prefix}{k}" if k in have or not have else f"{default.get(k, repr(''))} AS {k}"
        for k in _KEYS
    )


def _awake(conn: sqlite3.Connection, awake_since: float | None) -> tuple[str, tuple]:
    """The SQL condition (and its parameter) leaving dormant learnings out (``recall/fading.py``):
    ``awake_ts`` 0 is unknown (never dormant); a store without the column filters nothing."""
    if awake_since is None:
        return "", ()
    have = _have(conn)
    if "awake_ts" not in have:
        return "", ()
    return " AND (awake_ts = 0 OR awake_ts >= ?)", (float(awake_since),)


def _execute(conn: sqlite3.Connection, tail: str, params: tuple) -> sqlite3.Cursor:
    """``SELECT <reader columns> FROM notes`` + ``tail``, on an older store too."""
    return conn.execute(f"SELECT {_columns(conn)} FROM notes" + tail, params)


def _rows(cur: sqlite3.Cursor) -> list[dict]:
    return [dict(zip(_KEYS, r, strict=True)) for r in cur.fetchall()]


def repo_rows(
    conn: sqlite3.Connection, repo_key: str, limit: int = 60, *, awake_since: float | None = None
) -> list[dict]:
    """The strongest learnings scoped to one repository.

    Args:
        conn: A connection.
        repo_key: The repository's key (:func:`reflect_jobs.repo.repo_for`).
        limit: At most this many, strongest first.
        awake_since: Leave out the dormant ones (``awake_ts`` before this Unix time;
            ``recall/fading.py:awake_since``); ``None`` keeps them.

    Returns:
        Row mappings (the keys of the ``notes`` table but ``strength``/``content_hash``).
    """
    cond, extra = _awake(conn, awake_since)
    return _rows(
        _execute(
            conn,
            f" WHERE scope = 'repo' AND repo_key = ?{cond} ORDER BY strength DESC, id LIMIT ?",
            (repo_key, *extra, int(limit)),
        )
    )


def global_rows(conn: sqlite3.Connection, limit: int = 60) -> list[dict]:
    """The strongest global learnings (a note without a scope counts as global).

    Args:
        conn: A connection.
        limit: At most this many, strongest first.

    Returns:
        Row mappings, as :func:`repo_rows`.
    """
    return _rows(
        _execute(conn, " WHERE scope = 'global' ORDER BY strength DESC, id LIMIT ?", (int(limit),))
    )


def count_rows(
    conn: sqlite3.Connection, repo_key: str | None, *, awake_since: float | None = None
) -> int:
    """How many learnings a session in a repository could be told (its own and the global).

    Args:
        conn: A connection.
        repo_key: The repository's key; ``None`` for the global learnings only.
        awake_since: Leave out the dormant ones (as :func:`repo_rows`).

    Returns:
        The count (two indexed counts).
    """
    cond, extra = _awake(conn, awake_since)
    total = conn.execute(
        f"SELECT count(*) FROM notes WHERE scope = 'global'{cond}", extra
    ).fetchone()[0]
    if repo_key is not None:
        total += conn.execute(
            f"SELECT count(*) FROM notes WHERE scope = 'repo' AND repo_key = ?{cond}",
            (repo_key, *extra),
        ).fetchone()[0]
    return int(total)


def recent_rows(
    conn: sqlite3.Connection, repo_key: str | None, limit: int = 10, *, with_global: bool = False
) -> list[dict]:
    """The newest learnings of a repository (and, with ``repo_key`` None, of the whole KB).

    Args:
        conn: A connection.
        repo_key: The repository's key; ``None`` for every learning.
        limit: At most this many, newest first.
        with_global: Also the global learnings (what an MCP server in that repository
            may read); with ``repo_key`` None, only the global ones.

    Returns:
        Row mappings, as :func:`repo_rows`.
    """
    order = " ORDER BY updated_ts DESC, id LIMIT ?"
    if repo_key is None and not with_global:
        cur = _execute(conn, order, (int(limit),))
    elif repo_key is None:
        cur = _execute(conn, " WHERE scope = 'global'" + order, (int(limit),))
    elif with_global:
        cur = _execute(
            conn,
            " WHERE (scope = 'repo' AND repo_key = ?) OR scope = 'global'" + order,
            (repo_key, int(limit)),
        )
    else:
        cur = _execute(
            conn, " WHERE scope = 'repo' AND repo_key = ?" + order, (repo_key, int(limit))
        )
    return _rows(cur)


def get_row(conn: sqlite3.Connection, note_id: str) -> dict | None:
    """One stored learning by id.

    Args:
        conn: A connection.
        note_id: The note's id.

    Returns:
        Its row mapping, or ``None``.
    """
    rows = _rows(_execute(conn, " WHERE id = ?", (note_id,)))
    return rows[0] if rows else None


def rows_by_rid(conn: sqlite3.Connection, rids: list[int]) -> list[dict]:
    """Learnings by their row ids (the FTS table's rowids), each with ``rid`` added.

    Args:
        conn: A connection.
        rids: Row ids (any number; read in chunks of 500).

    Returns:
        Row mappings, as :func:`repo_rows`, plus ``rid``.
    """
    out: list[dict] = []
    cols = _columns(conn)
    for i in range(0, len(rids), 500):
        chunk = [int(r) for r in rids[i : i + 500]]
        cur = conn.execute(
            f"SELECT rid, {cols} FROM notes WHERE rid IN ({', '.join('?' for _ in chunk)})",
            chunk,
        )
        for r in cur.fetchall():
            out.append({"rid": r[0], **dict(zip(_KEYS, r[1:], strict=True))})
    return out


def global_stack_rows(
    conn: sqlite3.Connection, limit: int, *, awake_since: float | None = None
) -> list[dict]:
    """What fitting needs of the global learnings, strongest first: ``rid``, ``id``,
    ``applies_to`` and the ranking figures (no title or rule: thousands are read at a
    session start, and only the few told need their text, :func:`rows_by_rid`).

    Args:
        conn: A connection.
        limit: At most this many.
        awake_since: Leave out the dormant ones (as :func:`repo_rows`).

    Returns:
        ``{"rid", "id", "applies_to", "proof_count", "confidence", "updated_ts",
        "confirmations", "awake_ts"}`` mappings; none from a store written before
        ``applies_to`` (which globals fit is unknown until the worker refills it: none
        rather than unrelated ones).
    """
    have = _have(conn)
    if "applies_to" not in have:
        return []  # a store from before applies_to: no general rule until the refill
    keys: tuple[str, ...] = ("rid", "id", "applies_to", "proof_count", "confidence", "updated_ts")
    keys += tuple(k for k in ("confirmations", "awake_ts") if k in have)
    cond, extra = _awake(conn, awake_since)
    cur = conn.execute(
        f"SELECT {', '.join(keys)} FROM notes"
        f" WHERE scope = 'global'{cond} ORDER BY strength DESC, id LIMIT ?",
        (*extra, int(limit)),
    )
    return [dict(zip(keys, r, strict=True)) for r in cur.fetchall()]
