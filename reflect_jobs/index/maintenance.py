"""Reindex over the notes: the KB-wide task a committed add triggers (graph repair, which
calls :func:`reindex` when the graph is beyond repair, is :mod:`.repair`).

The notes are the source of truth; both indexes are derived. Reindex is incremental by
content hash (B14): only notes whose bytes changed are re-inserted, notes that are gone or
retired leave the index. The vector/graph index is optional per deployment
(``REFLECT_INDEX_VECTORS=0`` keeps a worker free of torch) and is updated from the same
change set as the lexical index.

How a note is listed, read and turned into each index's document is :mod:`.note_docs`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reflect_jobs import kb
from reflect_jobs.faults import failpoint
from reflect_jobs.lifecycle import ACTIVE, is_retired

from .file_manifest import FileManifest, index_lags, manifest
from .lexical import LexicalIndex
from .note_docs import (
    all_active,
    doc_text,
    graph_sidecar,
    iter_active,
    lex_doc,
    note_bytes,
    note_entries,
    sha,
)

if TYPE_CHECKING:
    from .graphrag import GraphIndex

#: Notes parsed and written per batch by a reindex without vectors (its memory follows
#: this, not the number of notes).
BATCH = 500

__all__ = [  # FileManifest, manifest and index_lags live in file_manifest; re-exported
    "FileManifest",
    "ReindexStats",
    "index_lags",
    "lexical_index",
    "manifest",
    "rebuild_communities",
    "reindex",
]


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


def _graph_index(kb_path: Path, embed_model: str | None) -> GraphIndex:
    from .embeddings import get_embedder  # heavy (torch): only when vectors are on
    from .graphrag import GraphIndex

    return GraphIndex(kb.kb_paths(kb_path).graph, embedder=get_embedder(embed_model))


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
    the vector index. The recall context store (``index/context.db``, ARCHITECTURE §13) gets
    the same changes; a failure there is reported in ``errors``, never raised.

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
    changed: list[tuple[kb.Note, str]] = []  # kept only for the graph (vectors on)
    lex_batch: list[dict[str, str]] = []
    ctx_batch: list[tuple[kb.Note, str]] = []
    drop_from_graph: list[str] = []
    graph_force = force
    owed_recorded = False
    files = manifest(kb_path)
    upserts: list[tuple[str, int, int, str]] = []
    docs_mtime = paths.documents.stat().st_mtime_ns
    ctx: Any = None
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
        from reflect_jobs.recall import refresh  # the context store (ARCHITECTURE §13)

        ctx = refresh.ContextSync(kb_path, force=force, complete=not indexed)

        def flush() -> None:
            """Write the batch (lexical index, context store) and let its notes go."""
            nonlocal owed_recorded
            if not lex_batch and not ctx_batch:
                return
            if not owed_recorded:
                # This process keeps no graph: whoever keeps it next rebuilds it from the
                # notes — recorded before the lexical index moves on.
                files.set_graph_owed({"force": True, "paths": [], "drop": []})
                owed_recorded = True
            lex.upsert_many(lex_batch)
            ctx.add(ctx_batch)
            lex_batch.clear()
            ctx_batch.clear()

        known = files.load()
        on_disk: set[str] = set()
        seen_paths: set[str] = set()
        notes, links = note_entries(paths.documents)
        for name in links:  # never read: a synced KB may link a "note" to a private file
            stats.unreadable += 1
            stats.errors.append(f"{name}: a symbolic link, skipped (notes are never followed)")
        for i, (name, key, size, mtime_ns) in enumerate(notes, 1):
            stats.notes += 1
            if progress:
                progress(i, len(notes))
            stem = name[:-3]
            seen_paths.add(key)
            prev = known.get(key)
            if prev and prev[:2] == (size, mtime_ns) and indexed.get(stem) == prev[2]:
                on_disk.add(stem)
                stats.unchanged += 1
                continue
            path = Path(key)
            try:
                data = note_bytes(path)
            except OSError as exc:
                stats.unreadable += 1
                stats.errors.append(f"{name}: {exc}")
                continue
            digest = sha(data)
            on_disk.add(stem)
            upserts.append((key, size, mtime_ns, digest))
            if indexed.get(stem) == digest:
                stats.unchanged += 1
                continue
            try:
                note = kb.parse_note(data.decode("utf-8", errors="replace"))
            except kb.NoteError as exc:
                stats.unreadable += 1
                stats.errors.append(f"{path.name}: {exc}")
                continue
            del data
            note.path = path
            on_disk.add(note.id)  # a hand-written note may be named differently from its id
            status = str(note.frontmatter.get("status") or ACTIVE)
            lex_batch.append(lex_doc(note, digest, status))
            if is_retired(status):
                stats.removed += 1
                drop_from_graph.append(note.id)
            else:
                stats.inserted += 1
                ctx_batch.append((note, digest))
                if vectors:
                    changed.append((note, digest))
            if not vectors and len(lex_batch) >= BATCH:
                flush()  # streaming: memory follows the batch, not the KB
        gone = [doc_id for doc_id in indexed if doc_id not in on_disk]
        stats.removed += len(gone)
        drop_from_graph += gone
        graph_force = False
        if vectors:
            # The graph's debt goes on record before the lexical index and the manifest
            # move on: once they have, this pass's notes look "unchanged" to the next.
            graph_force = _take_owed(files.graph_owed(), changed, drop_from_graph) or force
            if graph_force or changed or drop_from_graph:
                files.set_graph_owed(
                    {
                        "force": graph_force,
                        "paths": [str(n.path) for n, _ in changed],
                        "drop": drop_from_graph,
                    }
                )
            owed_recorded = True
        elif (force or drop_from_graph) and not owed_recorded:
            files.set_graph_owed({"force": True, "paths": [], "drop": []})
            owed_recorded = True
        flush()
        for doc_id in gone:
            lex.remove(doc_id)
        ctx.remove(drop_from_graph)
        files.save(upserts, [p for p in known if p not in seen_paths], docs_mtime)
    finally:
        lex.close()
        files.close()
    if ctx is not None:
        ctx.finish(iter_active)  # a store never filled is filled from every note, streamed
        if ctx.error:
            stats.errors.append(ctx.error)

    failpoint("mid:reindex")  # lexical index and manifest saved, graph/vector step not run
    if vectors and not (graph_force or changed or drop_from_graph):
        # Nothing changed and nothing is owed: decided from stats and two SQLite files,
        # without importing torch or nano-graphrag (a no-op reindex stays light).
        stats.graph = "unchanged"
    elif vectors:
        try:
            try:
                _update_graph(
                    kb_path, changed, drop_from_graph, force=graph_force, model=embed_model
                )
            except Exception as exc:
                if type(exc).__name__ != "IndexFormatError" or graph_force:
                    raise
                # A damaged or foreign-format graph store: it is derived, rebuild it.
                _update_graph(kb_path, [], [], force=True, model=embed_model)
                stats.errors.append(f"graph index rebuilt from the notes: {exc}")
            stats.graph = "updated"
            done = manifest(kb_path)
            try:
                done.set_graph_owed(None)
            finally:
                done.close()
        except Exception as exc:  # noqa: BLE001 - the lexical index still serves search
            stats.graph = f"failed: {type(exc).__name__}: {exc}"
            stats.errors.append(stats.graph)
    return stats


def _take_owed(
    owed: dict[str, Any] | None,
    changed: list[tuple[kb.Note, str]],
    drop_from_graph: list[str],
) -> bool:
    """Add what an unfinished earlier pass owed the graph to this pass's change set.

    Owed notes still on disk are re-read (active ones re-inserted, retired ones dropped);
    owed removals are kept. Notes gone since are dropped through the lexical diff.

    Returns:
        Whether the unfinished pass was a forced rebuild (then this one rebuilds too).
    """
    if not owed:
        return False
    have = {str(n.path) for n, _ in changed}
    for key in owed.get("paths") or []:
        if not isinstance(key, str) or key in have:
            continue
        try:
            data = note_bytes(Path(key))
            note = kb.parse_note(data.decode("utf-8", errors="replace"))
        except (OSError, kb.NoteError):
            continue
        note.path = Path(key)
        if is_retired(str(note.frontmatter.get("status") or ACTIVE)):
            drop_from_graph.append(note.id)
        else:
            changed.append((note, sha(data)))
    for doc_id in owed.get("drop") or []:
        if isinstance(doc_id, str) and doc_id not in drop_from_graph:
            drop_from_graph.append(doc_id)
    return bool(owed.get("force"))


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
        changed = [(n, d) for n, d in all_active(kb_path)]
    if removed:
        index.remove([r for r in removed if r in known])
    docs = [
        IndexDoc(id=note.id, text=doc_text(note), sidecar=graph_sidecar(note))
        for note, _digest in changed
    ]
    if docs:
        with contextlib.redirect_stdout(sys.stderr):
            index.upsert(docs)


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
