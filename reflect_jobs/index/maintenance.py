"""Reindex and graph repair over the notes: the KB-wide tasks a committed add triggers.

The notes are the source of truth; both indexes are derived. Reindex is incremental by
content hash (B14): only notes whose bytes changed are re-inserted, notes that are gone or
retired leave the index. The vector/graph index is optional per deployment
(``REFLECT_INDEX_VECTORS=0`` keeps a worker free of torch) and is updated from the same
change set as the lexical index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reflect_jobs import kb
from reflect_jobs.lifecycle import ACTIVE, is_retired

from . import graphml_repair
from .lexical import LexicalIndex


@dataclass
class ReindexStats:
    """What one :func:`reindex` did (``reindex --json`` prints it).

    ``notes`` counts the note files seen; ``inserted`` the active notes (re)indexed;
    ``removed`` the retired notes whose bytes changed plus the notes gone from disk;
    ``unchanged`` the notes skipped because their bytes did not change; ``unreadable`` those
    that could not be read or parsed; ``graph`` is ``skipped`` (vectors off), ``updated``,
    ``unchanged`` (nothing to do, decided without loading the model) or ``failed: …``;
    ``errors`` one line per problem.
    """

    notes: int = 0
    inserted: int = 0
    removed: int = 0
    unchanged: int = 0
    unreadable: int = 0
    graph: str = "skipped"
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The stats as a plain dict.

        Returns:
            Every field by name (``errors`` as a list).
        """
        return asdict(self)


def lexical_index(kb_path: Path) -> LexicalIndex:
    """Open the KB's lexical index (``index/lexical.db``), creating the KB's directories.

    Args:
        kb_path: The KB root.

    Returns:
        An open :class:`~reflect_jobs.index.lexical.LexicalIndex`; the caller closes it.
    """
    return LexicalIndex(kb.kb_paths(kb_path).index / "lexical.db")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _graph_index(kb_path: Path, embed_model: str | None):  # type: ignore[no-untyped-def]
    from .embeddings import get_embedder  # heavy (torch): only when vectors are on
    from .graphrag import GraphIndex

    return GraphIndex(kb.kb_paths(kb_path).graph, embedder=get_embedder(embed_model))


class FileManifest:
    """``path -> (size, mtime_ns, sha256)`` of every note as last indexed, and the folder's mtime.

    Lets reindex skip reading unchanged notes (a stat per note instead of a read + hash:
    +1 note on a 5,000-note KB stays flat) and lets search tell cheaply whether the index
    lags the notes (the folder's mtime moves on every atomic write, rename or delete).
    """

    def __init__(self, db_path: Path) -> None:
        """Open (or create) the manifest.

        Args:
            db_path: The SQLite file, usually ``kb/index/files.db``.
        """
        self.conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha TEXT)"
        )
        self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")

    def load(self) -> dict[str, tuple[int, int, str]]:
        """Every recorded note.

        Returns:
            ``{path: (size, mtime_ns, sha256)}``.
        """
        return {
            p: (sz, mt, sha)
            for p, sz, mt, sha in self.conn.execute("SELECT path, size, mtime_ns, sha FROM files")
        }

    def save(
        self,
        upserts: list[tuple[str, int, int, str]],
        deletes: list[str],
        docs_mtime_ns: int,
        *,
        graph_owed: bool = False,
    ) -> None:
        """Record one reindex's changes in one transaction.

        Args:
            upserts: ``(path, size, mtime_ns, sha256)`` of each note that was read.
            deletes: Paths no longer on disk.
            docs_mtime_ns: The documents folder's mtime when the reindex started.
            graph_owed: This pass changed what the graph/vector index must hold: it is
                marked out of step in the same transaction, so a crash before the graph
                update can never leave a "nothing changed" verdict behind.
        """
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", upserts)
            self.conn.executemany("DELETE FROM files WHERE path = ?", [(d,) for d in deletes])
            self.conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('documents_mtime_ns', ?)",
                (str(docs_mtime_ns),),
            )
            if graph_owed:
                self.conn.execute(
                    "INSERT INTO meta VALUES ('graph_gen', '1') ON CONFLICT(key) DO UPDATE"
                    " SET value = CAST(value AS INTEGER) + 1"
                )

    def graph_generation(self) -> tuple[str, bool]:
        """The manifest's change generation, and whether the graph/vector index holds it.

        Every pass that changes what the graph must hold bumps the generation; a graph
        update that succeeds records the generation it started from. Two reindexes that
        overlap (the CLI and a worker) therefore cannot mark each other's change as done.

        Returns:
            ``(generation, in_step)``; ``in_step`` is ``False`` before any graph update,
            after a failed one, or after a lexical-only pass that changed notes.
        """
        rows = dict(
            self.conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('graph_gen', 'graph_done_gen')"
            ).fetchall()
        )
        gen = rows.get("graph_gen", "0")
        return gen, rows.get("graph_done_gen") == gen

    def set_graph_done(self, generation: str) -> None:
        """Record that the graph/vector index holds every change up to ``generation``.

        Args:
            generation: What :meth:`graph_generation` returned before the graph update.
        """
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('graph_done_gen', ?)", (generation,))

    def clear(self) -> None:
        """Forget every note and the folder's mtime (a forced reindex starts from nothing)."""
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("DELETE FROM files")
            self.conn.execute("DELETE FROM meta")

    def documents_mtime_ns(self) -> int | None:
        """The documents folder's mtime recorded by the last reindex.

        Returns:
            Nanoseconds since the epoch, or ``None`` before the first reindex (or after
            :meth:`clear`).
        """
        row = self.conn.execute(
            "SELECT value FROM meta WHERE key = 'documents_mtime_ns'"
        ).fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def manifest(kb_path: Path) -> FileManifest:
    """Open the KB's file manifest (``index/files.db``), creating the KB's directories.

    Args:
        kb_path: The KB root.

    Returns:
        An open :class:`FileManifest`; the caller closes it.
    """
    return FileManifest(kb.kb_paths(kb_path).index / "files.db")


def index_lags(kb_path: Path) -> bool:
    """True when notes changed since the last reindex (cheap: two stats and one row).

    "Changed" means the documents folder's mtime differs from the one recorded, which every
    atomic write, rename or delete moves; a note edited in place without a rename is not
    seen. Before the first reindex it is true as soon as there is a note.

    Args:
        kb_path: The KB root.

    Returns:
        Whether a reindex is owed; ``False`` when ``documents/`` does not exist.
    """
    paths = kb.kb_paths(kb_path)
    if not paths.documents.is_dir():
        return False
    m = manifest(kb_path)
    try:
        recorded = m.documents_mtime_ns()
    finally:
        m.close()
    current = paths.documents.stat().st_mtime_ns
    has_notes = (
        any(p.suffix == ".md" for p in paths.documents.iterdir()) if recorded is None else True
    )
    return (recorded is None and has_notes) or (recorded is not None and recorded != current)


def reindex(
    kb_path: Path,
    *,
    force: bool = False,
    vectors: bool,
    embed_model: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReindexStats:
    """Bring the lexical (and graph/vector) index in line with ``documents/*.md``.

    Cost is one stat per note, a read + sha256 only for notes whose size or mtime changed,
    and a parse only for notes whose bytes changed, so adding one note to a large KB stays
    cheap (B14). Retired notes stay in the lexical index with their status (search filters
    them) so an unchanged retired note is not re-parsed on every pass; they are removed from
    the vector index.

    Args:
        kb_path: The KB root.
        force: Delete the lexical index, the manifest and the graph directory, and rebuild
            them from every note. A lexical index that cannot be read forces this too.
        vectors: ``Settings.index_vectors``: also update the vector/graph index.
        embed_model: ``Settings.embed_model`` for that index; ``None`` for the default model.
        progress: Called as ``progress(i, n)`` before the i-th of n notes is looked at.

    Returns:
        The counts and errors of this pass. A graph update that fails is recorded in
        ``graph`` and ``errors``, never raised; a graph store in a foreign or damaged format
        is rebuilt from the notes once.

    Raises:
        OSError: ``documents/`` cannot be listed or stat'ed.
        sqlite3.DatabaseError: The lexical index or manifest fails while being written.
    """
    paths = kb.kb_paths(kb_path)
    stats = ReindexStats()
    lex = lexical_index(kb_path)
    changed: list[tuple[kb.Note, str]] = []
    drop_from_graph: list[str] = []
    files = manifest(kb_path)
    upserts: list[tuple[str, int, int, str]] = []
    docs_mtime = paths.documents.stat().st_mtime_ns
    try:
        # The full FTS integrity check is O(index); the incremental path only needs to know
        # the index opens and answers (a damaged file raises here). `repair`/`doctor` and
        # --force run the full check.
        try:
            indexed = {} if force else lex.indexed_hashes()
        except sqlite3.DatabaseError:
            force = True
        if force:
            lex.rebuild()
            files.clear()
            indexed = {}
        known = files.load()
        on_disk: set[str] = set()
        seen_paths: set[str] = set()
        notes = _note_entries(paths.documents)
        for i, (name, key, st) in enumerate(notes, 1):
            stats.notes += 1
            if progress:
                progress(i, len(notes))
            stem = name[:-3]
            seen_paths.add(key)
            prev = known.get(key)
            if prev and prev[:2] == (st.st_size, st.st_mtime_ns) and indexed.get(stem) == prev[2]:
                on_disk.add(stem)
                stats.unchanged += 1
                continue
            path = Path(key)
            try:
                data = path.read_bytes()
            except OSError as exc:
                stats.unreadable += 1
                stats.errors.append(f"{name}: {exc}")
                continue
            digest = _sha(data)
            on_disk.add(stem)
            upserts.append((key, st.st_size, st.st_mtime_ns, digest))
            if indexed.get(stem) == digest:
                stats.unchanged += 1
                continue
            try:
                note = kb.parse_note(data.decode("utf-8", errors="replace"))
            except kb.NoteError as exc:
                stats.unreadable += 1
                stats.errors.append(f"{path.name}: {exc}")
                continue
            note.path = path
            on_disk.add(note.id)  # a hand-written note may be named differently from its id
            status = str(note.frontmatter.get("status") or ACTIVE)
            _lex_upsert(lex, note, digest, status)
            if is_retired(status):
                stats.removed += 1
                drop_from_graph.append(note.id)
            else:
                stats.inserted += 1
                changed.append((note, digest))
        gone = [doc_id for doc_id in indexed if doc_id not in on_disk]
        for doc_id in gone:
            lex.remove(doc_id)
        stats.removed += len(gone)
        drop_from_graph += gone
        graph_owed = force or bool(changed or drop_from_graph)
        files.save(
            upserts, [p for p in known if p not in seen_paths], docs_mtime, graph_owed=graph_owed
        )
        graph_gen, graph_in_step = files.graph_generation()
    finally:
        lex.close()
        files.close()

    if vectors and graph_in_step:
        # Nothing changed and the graph holds it all: decided from stats and two SQLite
        # files, without importing torch or nano-graphrag (a no-op reindex stays light).
        stats.graph = "unchanged"
    elif vectors:
        try:
            try:
                _update_graph(kb_path, changed, drop_from_graph, force=force, model=embed_model)
            except Exception as exc:
                if type(exc).__name__ != "IndexFormatError" or force:
                    raise
                # A damaged or foreign-format graph store: it is derived, rebuild it.
                _update_graph(kb_path, [], [], force=True, model=embed_model)
                stats.errors.append(f"graph index rebuilt from the notes: {exc}")
            stats.graph = "updated"
            files = manifest(kb_path)
            try:
                files.set_graph_done(graph_gen)
            finally:
                files.close()
        except Exception as exc:  # noqa: BLE001 - the lexical index still serves search
            stats.graph = f"failed: {type(exc).__name__}: {exc}"
            stats.errors.append(stats.graph)
    return stats


def _note_entries(documents: Path) -> list[tuple[str, str, os.stat_result]]:
    """``(name, path, stat)`` of ``documents/*.md`` sorted by name.

    scandir + plain strings: at 5,000 notes pathlib's globbing, sorting and per-path
    objects cost more than the whole incremental reindex should.
    """
    try:
        with os.scandir(documents) as it:
            entries = [
                (e.name, e.path, e.stat())
                for e in it
                if e.name.endswith(".md") and not e.name.startswith(".") and e.is_file()
            ]
    except FileNotFoundError:
        return []
    entries.sort(key=lambda x: x[0])
    return entries


def _lex_upsert(lex: LexicalIndex, note: kb.Note, digest: str, status: str) -> None:
    fm = note.frontmatter
    fields = ("key_insight", "problem", "root_cause", "fix", "rule", "tags", "entities")
    text = " ".join(str(fm.get(k) or "") for k in fields)
    lex.upsert(
        note.id,
        title=str(fm.get("title", "")),
        body=text + "\n" + note.body,
        path=str(note.path),
        content_hash=digest,
        status=status if is_retired(status) else ACTIVE,
    )


def _update_graph(
    kb_path: Path,
    changed: list[tuple[kb.Note, str]],
    removed: list[str],
    *,
    force: bool,
    model: str | None,
) -> None:
    from .graphrag import IndexDoc

    graph_dir = kb.kb_paths(kb_path).graph
    if force:
        import shutil

        shutil.rmtree(graph_dir, ignore_errors=True)
        graph_dir.mkdir(parents=True, exist_ok=True)
    index = _graph_index(kb_path, model)
    known = index.doc_ids()
    if force:
        changed = [(n, d) for n, d in _all_active(kb_path)]
    if removed:
        index.remove([r for r in removed if r in known])
    docs = []
    for note, _digest in changed:
        sidecar_path = note.path.with_name(note.path.stem + ".entities.yaml")
        try:
            sidecar = (
                kb.load_sidecar(sidecar_path)
                if sidecar_path.exists()
                else kb.heuristic_sidecar(note)
            )
        except kb.NoteError:
            sidecar = kb.heuristic_sidecar(note)
        docs.append(IndexDoc(id=note.id, text=doc_text(note), sidecar=sidecar))
    if docs:
        with contextlib.redirect_stdout(sys.stderr):
            index.upsert(docs)


def doc_text(note: kb.Note) -> str:
    """The text a note is indexed under in the graph/vector index.

    The frontmatter fields a person searches by (title, key insight, problem, root cause,
    fix, rule) as ``key: value`` lines, then the body, so a query matching the summary of a
    learning finds it even when the body is long.

    Args:
        note: A parsed note.

    Returns:
        The indexed text.
    """
    fm = note.frontmatter
    head = "\n".join(
        f"{k}: {fm.get(k)}"
        for k in ("title", "key_insight", "problem", "root_cause", "fix", "rule")
        if fm.get(k)
    )
    return f"{head}\n\n{note.body}"


def _all_active(kb_path: Path) -> list[tuple[kb.Note, str]]:
    out = []
    for path in kb.iter_notes(kb_path):
        try:
            data = path.read_bytes()
            note = kb.parse_note(data.decode("utf-8", errors="replace"))
        except (OSError, kb.NoteError):
            continue
        note.path = path
        if not is_retired(note.frontmatter.get("status")):
            out.append((note, _sha(data)))
    return out


def graphml_path(kb_path: Path) -> Path:
    """The one graph this KB uses (never a shard found by globbing: B18).

    Args:
        kb_path: The KB root (its directories are created when missing).

    Returns:
        ``index/graph/graph_chunk_entity_relation.graphml`` under it (it may not exist).
    """
    return kb.kb_paths(kb_path).graph / "graph_chunk_entity_relation.graphml"


@dataclass
class RepairReport:
    """What :func:`repair` did: the graphml action and detail, maintenance counts, a rebuild."""

    action: str
    detail: str
    maintained: dict[str, int] | None = None
    rebuilt: bool = False


def repair(
    kb_path: Path, *, maintain: bool = False, vectors: bool, embed_model: str | None = None
) -> RepairReport:
    """Validate/repair the KB's graphml; a graph beyond repair is rebuilt from the notes.

    Args:
        kb_path: The KB root.
        maintain: When the graph is valid or was repaired, also prune orphans and dangling
            edges and relink isolated nodes (:func:`graphml_repair.maintain`).
        vectors: ``Settings.index_vectors``: whether this process keeps a vector/graph index
            (a rebuild of an unrepairable graph needs it).
        embed_model: ``Settings.embed_model`` for that rebuild; ``None`` for the default.

    Returns:
        The :func:`graphml_repair.repair` action (``valid``, ``repaired``, ``unrepairable``
        or ``missing``) and detail; ``rebuilt`` when an unrepairable graph was rebuilt by a
        forced :func:`reindex`; ``maintained`` with the maintenance counts when it ran.
    """
    path = graphml_path(kb_path)
    result = graphml_repair.repair(path)
    report = RepairReport(action=result.action, detail=result.detail)
    if not result.ok and result.action != "missing":
        stats = reindex(kb_path, force=True, vectors=vectors, embed_model=embed_model)
        report.rebuilt = True
        report.detail += f"; rebuilt from notes ({stats.inserted} notes, graph {stats.graph})"
    elif maintain and path.exists():
        report.maintained = asdict(graphml_repair.maintain(path))
    return report


def communities_owed(kb_path: Path) -> bool:
    """Whether :func:`rebuild_communities` may have work, read without loading the index.

    One read-only query of the graph store's ``meta`` row, so the periodic task does not
    start the model stack every 30 minutes only to learn that nothing changed.

    Args:
        kb_path: The KB root.

    Returns:
        ``False`` when there is no graph directory or the store says its communities are
        built and current; ``True`` otherwise, including whenever the store cannot be read
        (the full check then decides).
    """
    graph_dir = kb.kb_paths(kb_path, create=False).graph
    store = graph_dir / "reflect_index.db"
    if not store.exists():
        return graph_dir.is_dir() and any(graph_dir.iterdir())
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'communities'").fetchone()
        finally:
            conn.close()
        state = json.loads(row[0]) if row else {}
    except (sqlite3.Error, ValueError):
        return True
    return bool(state.get("stale")) or not state.get("built")


def rebuild_communities(kb_path: Path, *, vectors: bool, embed_model: str | None = None) -> bool:
    """The periodic clustering + community reports (deferred off the insert path, B14).

    Args:
        kb_path: The KB root.
        vectors: ``Settings.index_vectors``; ``False`` means there is no graph to cluster.
        embed_model: ``Settings.embed_model``; ``None`` for the default model.

    Returns:
        ``True`` when the communities and their reports were rebuilt; ``False`` when vectors
        are off, the graph directory is missing or empty, or the communities are current.
    """
    if not vectors:
        return False
    graph_dir = kb.kb_paths(kb_path).graph
    if not graph_dir.is_dir() or not any(graph_dir.iterdir()):
        return False
    index = _graph_index(kb_path, embed_model)
    if not index.communities_stale:
        return False
    with contextlib.redirect_stdout(sys.stderr):
        index.rebuild_communities()
    return True
