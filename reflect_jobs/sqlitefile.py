"""Is a SQLite file usable, and moving a damaged one aside (the queue and the ledger).

Two of our stores are SQLite files a person never edits but a disk, a sync tool or a bad
copy can garble: the queue (``queue.db``, transport only: rebuilt empty at a consumer's
start, ``queue.py``) and the ledger (``reflect.db``, the truth: named in one line with its
fix, ``reflect-jobs db check`` / ``db rebuild``). Both ask the same two questions here.
Stdlib only.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

_HEADER = b"SQLite format 3\x00"


def damage(path: str | os.PathLike[str], *, full: bool = False) -> str | None:
    """Why the SQLite file at ``path`` cannot be used as a database, if it cannot.

    Args:
        path: The file.
        full: ``PRAGMA integrity_check`` (every index entry) instead of ``quick_check``.

    Returns:
        ``None`` for a usable file, for a missing or empty one (SQLite creates it) and for
        one that is only locked or busy (in use: not ours to judge now); else one line —
        ``not a SQLite database``, ``file is not a database``, ``database disk image is
        malformed`` or the check's first finding.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_HEADER))
    except OSError:
        return None
    if not head:
        return None
    if head != _HEADER:
        return "not a SQLite database"
    try:
        conn = sqlite3.connect(str(path), timeout=5)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        row = conn.execute(f"PRAGMA {'integrity_check' if full else 'quick_check'}").fetchone()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None
        return str(exc)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        conn.close()
    if row and row[0] == "ok":
        return None
    return f"integrity check: {row[0] if row else 'no answer'}"


def set_aside(path: str | os.PathLike[str], label: str) -> Path:
    """Rename the file (and its ``-wal``/``-shm``) to ``<path>.<label>-<UTC time>``.

    Nothing is deleted: the damaged copy stays for a person (``doctor`` names it).

    Args:
        path: The file.
        label: What it is (``garbled``, ``damaged``).

    Returns:
        Where the file now is.
    """
    kept = Path(f"{path}.{label}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    for suffix in ("-wal", "-shm", ""):
        src = f"{path}{suffix}"
        if os.path.exists(src):
            os.replace(src, f"{kept}{suffix}")
    return kept
