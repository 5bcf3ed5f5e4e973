"""The verification store: ``$REFLECT_HOME/verify.db`` (0600), written by the hook (stdlib).

Two small tables (ARCHITECTURE §13.2):

* ``symbols`` — whether a file held a symbol, per file version ``(mtime_ns, size)``, so a
  session start re-reads only files that changed since the last one (a ``stat`` decides);
* ``streaks`` — per learning, how many consecutive session starts found it ``stale``
  (every anchored path gone), counted once per session id. At
  :data:`reflect_jobs.lifecycle.STALE_AFTER` the hook asks the worker to take it out of
  circulation (``tasks.stale_anchors`` → ledger status ``stale_anchors``), at most once a
  day per learning; a verdict that is not stale ends the streak, and ``restore`` resets it.

It is a cache and a counter, not a record: deleting the file loses nothing but the time to
re-read a few files and the streaks so far. It lives under the home, not the KB: it
describes this machine's working trees. Every problem opening or writing it is the
caller's to log; the block is told without it.
"""

from __future__ import annotations

import os
import sqlite3
import time

FILE_NAME = "verify.db"
#: A learning handed to the worker is handed again only after this long (no worker ran,
#: or its message was lost).
REHAND_SEC = 86400.0
TIMEOUT_SEC = 0.25
_SCHEMA = """
CREATE TABLE IF NOT EXISTS symbols (
    root TEXT NOT NULL, rel TEXT NOT NULL, symbol TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, found INTEGER NOT NULL,
    PRIMARY KEY (root, rel, symbol)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS streaks (
    id TEXT PRIMARY KEY, stale INTEGER NOT NULL, last_session TEXT NOT NULL DEFAULT '',
    last_ts REAL NOT NULL, missing TEXT NOT NULL DEFAULT '', handed REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""


def store_path(home: str) -> str:
    """Where a home's verification store lives.

    Args:
        home: ``$REFLECT_HOME``.

    Returns:
        ``<home>/verify.db``.
    """
    return os.path.join(home, FILE_NAME)


def _open(path: str) -> sqlite3.Connection:
    """Connect with the journal in memory and no fsync: a cache and a counter need no
    durability, and an fsync per session start (or WAL's ``-wal``/``-shm`` files made and
    removed at every open and close) cost more than the whole verification; a file a crash
    left damaged is set aside by the caller. The checks run in a background thread
    (``recall/verify.py``), so the connection is shared across threads (``sqlite3``
    serialises calls)."""
    conn = sqlite3.connect(path, timeout=TIMEOUT_SEC, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode = MEMORY")
        conn.execute("PRAGMA synchronous = OFF")
        conn.executescript(_SCHEMA)
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class VerifyStore:
    """The symbol cache (``get``/``put`` for :func:`reflect_jobs.recall.verify.verdict`) and
    the streaks, over one connection; answers are written at :meth:`flush`.

    Args:
        path: The database file; created 0600 (its directory 0700) when missing.

    Raises:
        sqlite3.Error: The file is locked past :data:`TIMEOUT_SEC` or not a database.
        OSError: It cannot be created.
    """

    def __init__(self, path: str) -> None:
        """Open (creating it private) and read nothing yet."""
        from reflect_jobs.perms import private_file

        private_file(path)
        try:
            self.conn = _open(path)
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            # Not a database (a crash during a write with synchronous off, a stray file):
            # it only caches, so it is set aside and started again.
            os.replace(path, f"{path}.bad-{int(time.time())}")
            private_file(path)
            self.conn = _open(path)
        self._pending: list[tuple] = []

    def get(self, root: str, rel: str, symbol: str, mtime_ns: int, size: int) -> int | None:
        """The cached answer for this file version (``verify.MemoryCache.get``'s contract).

        Args:
            root: The repository's real root.
            rel: The anchor's path under it.
            symbol: The symbol looked for.
            mtime_ns: The file's modification time now.
            size: Its size now.

        Returns:
            ``verify.FOUND``/``ABSENT``/``UNCHECKED``; ``None`` when not cached or the file
            changed since.
        """
        row = self.conn.execute(
            "SELECT mtime_ns, size, found FROM symbols WHERE root = ? AND rel = ? AND symbol = ?",
            (root, rel, symbol),
        ).fetchone()
        if row is None or row[0] != mtime_ns or row[1] != size:
            return None
        return int(row[2])

    def put(self, root: str, rel: str, symbol: str, mtime_ns: int, size: int, found: int) -> None:
        """Remember an answer; written at :meth:`flush`.

        Args:
            root: The repository's real root.
            rel: The anchor's path under it.
            symbol: The symbol looked for.
            mtime_ns: The file's modification time when read.
            size: Its size when read.
            found: ``verify.FOUND``, ``ABSENT`` or ``UNCHECKED``.
        """
        self._pending.append((root, rel, symbol, mtime_ns, size, found))

    def flush(self) -> None:
        """Write the answers gathered since the last flush (one transaction; none: no write)."""
        pending, self._pending = self._pending, []
        if pending:
            with self.conn:
                self.conn.executemany(
                    "INSERT OR REPLACE INTO symbols VALUES (?, ?, ?, ?, ?, ?)", pending
                )

    def record(
        self,
        session_id: str,
        verdicts: dict,
        *,
        stale_after: int,
        now: float | None = None,
    ) -> list[tuple[str, list[str]]]:
        """Count one session start's verdicts into the streaks.

        A ``stale`` verdict adds one to the learning's streak, once per session id (a
        resumed or compacted session starting again is the same session); ``ok`` and
        ``partial`` end it; ``unanchored`` and ``unverified`` leave it as it is.

        Args:
            session_id: The session (``""``: every call counts).
            verdicts: ``id -> Verdict`` from ``verify.check_many``.
            stale_after: How many consecutive stale verdicts take a learning out.
            now: The Unix time (default now).

        Returns:
            ``(id, missing)`` of the learnings whose streak reached ``stale_after`` (and
            were not handed over in the last :data:`REHAND_SEC`): the caller asks the
            worker to move them.
        """
        now = time.time() if now is None else now
        stale = {i: v for i, v in verdicts.items() if v.status == "stale"}
        held = [i for i, v in verdicts.items() if v.status in ("ok", "partial")]
        if not stale and not held:
            return []
        reached: list[tuple[str, list[str]]] = []
        if held:  # read first: a streak is rare, and a write costs every session start
            marks = ",".join("?" * len(held))
            held = [
                r[0]
                for r in self.conn.execute(f"SELECT id FROM streaks WHERE id IN ({marks})", held)
            ]
        if not stale and not held:
            return []
        with self.conn:
            if held:
                marks = ",".join("?" * len(held))
                self.conn.execute(f"DELETE FROM streaks WHERE id IN ({marks})", held)
            for ident, v in stale.items():
                row = self.conn.execute(
                    "SELECT stale, last_session, handed FROM streaks WHERE id = ?", (ident,)
                ).fetchone()
                count, handed = (row[0], row[2]) if row else (0, 0.0)
                if row is None or not session_id or row[1] != session_id:
                    count += 1
                # Handed over once a day at most: until the worker's reindex drops it from
                # the context store, every session start finds it stale again.
                if count >= stale_after and now - handed >= REHAND_SEC:
                    reached.append((ident, list(v.missing)))
                    handed = now
                self.conn.execute(
                    "INSERT OR REPLACE INTO streaks VALUES (?, ?, ?, ?, ?, ?)",
                    (ident, count, session_id, now, "\n".join(v.missing), handed),
                )
        return reached

    def streak(self, ident: str) -> int:
        """A learning's current stale streak (0 when none).

        Args:
            ident: The learning's id.

        Returns:
            The count.
        """
        row = self.conn.execute("SELECT stale FROM streaks WHERE id = ?", (ident,)).fetchone()
        return int(row[0]) if row else 0

    def reset(self, ident: str) -> None:
        """Forget a learning's streak (``restore`` of a ``stale_anchors`` learning).

        Args:
            ident: The learning's id.
        """
        with self.conn:
            self.conn.execute("DELETE FROM streaks WHERE id = ?", (ident,))

    def close(self) -> None:
        """Close the connection (pending answers not flushed are dropped)."""
        self.conn.close()
