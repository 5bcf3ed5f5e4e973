"""One search over everything the agents remember (seed 002): the harnesses' memory files.

Beside the store's items and the knowledge base, Claude Code and Codex keep memories of
their own, as markdown files we never write:

* Claude Code: ``<config dir>/projects/<project>/memory/*.md`` (``CLAUDE_CONFIG_DIR``
  honoured, default ``~/.claude``), where ``<project>`` is the repository root's absolute
  path with every character outside ``[A-Za-z0-9]`` turned into ``-`` (how Claude Code names
  a project's directory);
* Codex: ``$CODEX_HOME/memories/`` (default ``~/.codex/memories``), its ``*.md`` files and
  those one directory down (Codex's memories are the user's, not a repository's: they are
  searched from every repository).

They are indexed **read-only** in the reflection index's own SQLite file (tables
``memfiles`` and ``mem_fts``, FTS5 with the items' tokenizer), refreshed by stat like the
logs: a file whose ``(size, mtime_ns, inode)`` is unchanged is not read again, a removed one
is forgotten. Every search hit names the file it came from.

Hostile or huge input stays bounded and is logged, never followed: at most
:data:`MAX_FILES` files a directory (the rest skipped, logged once per refresh), files over
:data:`MAX_FILE_BYTES` skipped unread (a 1 GB ``MEMORY.md`` costs a stat), and every read
goes through ``fsio.read_inside`` (``O_NOFOLLOW`` on every component below the harness's
directory): a memory file that is a symbolic link (to ``/etc/shadow`` or anywhere) is never
opened. What is indexed is secret-redacted first, like everything else we store.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import stat
from dataclasses import dataclass
from typing import Any

from reflect_jobs import harnesses
from reflect_jobs.fsio import TooLarge, UnsafePath, read_inside

from .events import redact_text

log = logging.getLogger(__name__)

#: The most files indexed from one memory directory (the rest are skipped and logged).
MAX_FILES = 2_000
#: The most names listed from one directory (a directory of millions stops here).
LIST_CAP = 10 * MAX_FILES
#: A memory file larger than this is skipped unread (logged).
MAX_FILE_BYTES = 1024 * 1024
#: The most characters of a file kept in the index (the rest is not searchable).
MAX_INDEXED_CHARS = 200_000
SNIPPET_CHARS = 240
_TOKENIZER = "porter unicode61 remove_diacritics 2"
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS memfiles (
    rid INTEGER PRIMARY KEY, scope TEXT NOT NULL, path TEXT NOT NULL, harness TEXT NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL,
    title TEXT NOT NULL, UNIQUE (scope, path)
);
CREATE VIRTUAL TABLE IF NOT EXISTS mem_fts USING fts5(title, body, tokenize='{_TOKENIZER}');
"""


@dataclass(frozen=True)
class Source:
    """One memory directory: which harness, the scope its rows are kept under, where."""

    harness: str
    scope: str
    base: str
    depth: int = 0  # how many directory levels below ``base`` are read


def claude_project_name(root: str) -> str:
    """The directory Claude Code keeps a project's sessions and memory in.

    Args:
        root: The repository root's absolute path.

    Returns:
        The path with every character outside ``[A-Za-z0-9]`` replaced by ``-``.
    """
    return _NOT_ALNUM.sub("-", root)


def sources_for(root: str | None, environ: dict[str, str] | None = None) -> list[Source]:
    """The memory directories searched from the repository at ``root``.

    Args:
        root: The repository root (None: only the harness-wide memories).
        environ: The environment (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``HOME``).

    Returns:
        Claude Code's project memory (with a root) and Codex's memories.
    """
    env = os.environ if environ is None else environ
    out = []
    if root:
        claude = harnesses.home_of(harnesses.get("claude"), env)
        base = os.path.join(claude, "projects", claude_project_name(root), "memory")
        out.append(Source("claude", f"claude:{root}", base))
    codex = harnesses.home_of(harnesses.get("codex"), env)
    out.append(Source("codex", "codex", os.path.join(codex, "memories"), depth=1))
    return out


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the memory tables in the reflection index when they are missing.

    Args:
        conn: The index's connection.
    """
    conn.executescript(SCHEMA)


@dataclass
class Scan:
    """What one directory scan found: ``{relative path: (size, mtime_ns, inode)}``, and
    how many entries were skipped (over the file bound, too large, links)."""

    files: dict[str, tuple[int, int, int]]
    over_count: int = 0
    too_large: int = 0
    links: int = 0


def scan(source: Source) -> Scan:
    """Stat the ``*.md`` files of a memory directory, bounded; links are never listed.

    Names are listed without a ``stat`` (at most :data:`LIST_CAP` of them a directory) and
    sorted, so the same :data:`MAX_FILES` are indexed at every refresh of a huge directory
    (no churn); only those are stat'ed.

    Args:
        source: The directory.

    Returns:
        The :class:`Scan` (empty when the directory does not exist or is not one).
    """
    found = Scan({})
    pending = [("", source.depth)]
    while pending:
        rel, depth = pending.pop()
        names: list[tuple[str, bool]] = []
        try:
            with os.scandir(os.path.join(source.base, rel) if rel else source.base) as it:
                for entry in it:
                    if len(names) >= LIST_CAP:
                        found.over_count += 1
                        break
                    if entry.name.startswith("."):
                        continue
                    if entry.is_symlink():
                        found.links += 1
                    elif entry.name.endswith(".md") or (depth > 0 and entry.is_dir()):
                        names.append((entry.name, entry.name.endswith(".md")))
        except OSError:
            continue
        names.sort()
        for n, (name, is_md) in enumerate(names):
            if len(found.files) >= MAX_FILES:  # the rest are counted, never stat'ed
                found.over_count += sum(md for _, md in names[n:])
                break
            path = os.path.join(rel, name) if rel else name
            try:
                st = os.stat(os.path.join(source.base, path), follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and depth > 0:
                pending.append((path, depth - 1))
                continue
            if not (is_md and stat.S_ISREG(st.st_mode)):
                continue
            if st.st_size > MAX_FILE_BYTES:
                found.too_large += 1
                continue
            found.files[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def _title(text: str, name: str) -> str:
    m = _HEADING.search(text[:4096])
    return (m.group(1) if m else os.path.basename(name))[:200]


def refresh(conn: sqlite3.Connection, source: Source) -> dict[str, int]:
    """Bring one memory directory's rows in line with its files (read-only on them).

    Args:
        conn: The reflection index's connection (:func:`ensure_schema` done).
        source: The directory.

    Returns:
        ``{"read", "removed", "skipped"}`` counts.
    """
    found = scan(source)
    skipped = found.over_count + found.too_large + found.links
    if skipped:
        log.warning(
            "memory files skipped: %s (%d over the %d-file bound, %d over %d bytes, %d links)",
            source.base,
            found.over_count,
            MAX_FILES,
            found.too_large,
            MAX_FILE_BYTES,
            found.links,
        )
    rows = conn.execute(
        "SELECT rid, path, size, mtime_ns, inode FROM memfiles WHERE scope = ?", (source.scope,)
    ).fetchall()
    stored = {r[1]: (r[0], (r[2], r[3], r[4])) for r in rows}
    read = removed = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        for rel, (rid, sig) in stored.items():
            if found.files.get(rel) != sig:
                conn.execute("DELETE FROM memfiles WHERE rid = ?", (rid,))
                conn.execute("DELETE FROM mem_fts WHERE rowid = ?", (rid,))
                removed += rel not in found.files
        for rel, sig in found.files.items():
            if rel in stored and stored[rel][1] == sig:
                continue
            try:
                raw = read_inside(source.base, *rel.split(os.sep), max_bytes=MAX_FILE_BYTES)
            except (TooLarge, UnsafePath, OSError):
                skipped += 1  # grew, became a link or vanished since the scan
                continue
            text = redact_text(raw.decode("utf-8", errors="replace")[:MAX_INDEXED_CHARS])
            title = _title(text, rel)
            cur = conn.execute(
                "INSERT INTO memfiles (scope, path, harness, size, mtime_ns, inode, title)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (source.scope, rel, source.harness, *sig, title),
            )
            conn.execute(
                "INSERT INTO mem_fts (rowid, title, body) VALUES (?, ?, ?)",
                (cur.lastrowid, title, text),
            )
            read += 1
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return {"read": read, "removed": removed, "skipped": skipped}


def search(
    conn: sqlite3.Connection, sources: list[Source], query: str, k: int = 5
) -> list[dict[str, Any]]:
    """Memory files of ``sources`` matching ``query`` (BM25 over title and text).

    Args:
        conn: The reflection index's connection.
        sources: The directories searched (their rows, as :func:`refresh` left them).
        query: Free text (never FTS5 syntax: ``index.fts_query.build_match``).
        k: At most this many hits.

    Returns:
        ``{"file", "harness", "title", "snippet", "score"}`` per hit, best first; ``file``
        is the absolute path of the memory file it came from.
    """
    from reflect_jobs.index.fts_query import build_match

    match = build_match(query, idents=False)
    if match is None or k <= 0 or not sources:
        return []
    bases = {s.scope: s.base for s in sources}
    marks = ", ".join("?" for _ in bases)
    rows = conn.execute(
        "SELECT m.scope, m.path, m.harness, m.title,"
        f" snippet(mem_fts, 1, '', '', ' … ', 24), bm25(mem_fts, 4.0, 1.0) AS r"
        " FROM mem_fts JOIN memfiles m ON m.rid = mem_fts.rowid"
        f" WHERE mem_fts MATCH ? AND m.scope IN ({marks}) ORDER BY r, m.path LIMIT ?",
        (match, *bases, int(k)),
    ).fetchall()
    return [
        {
            "file": os.path.join(bases[scope], path),
            "harness": harness,
            "title": title,
            "snippet": " ".join(str(snip).split())[:SNIPPET_CHARS],
            "score": round(-float(r), 4),
        }
        for scope, path, harness, title, snip, r in rows
    ]
