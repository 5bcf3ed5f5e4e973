"""The knowledge base on disk: ``kb/documents/<id>.md`` + ``<id>.entities.yaml``.

Notes are the source of truth; every index under ``kb/index/`` can be rebuilt from them.
Each write is atomic and verified by parsing it back, so "written" always means "exists and
parses" (SPEC-drain §10 B12).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..fsio import UnsafePath, atomic_write, linked_part
from ..lifecycle import ACTIVE, RETIRED_STATUSES
from ..perms import private_dir
from .heuristic import heuristic_sidecar, needs_heuristic_entities
from .ids import learning_id
from .parse import Note, NoteError, load_sidecar, parse_note
from .render import (
    applies_when,
    render_frontmatter_note,
    render_note,
    render_sidecar_data,
    sidecar_data,
)

SIDECAR_SUFFIX = ".entities.yaml"


@dataclass
class NoteFile:
    """Where a note landed and the sha256 of its bytes (the incremental-reindex key)."""

    id: str
    path: Path
    sidecar_path: Path
    content_hash: str


@dataclass(frozen=True)
class KBPaths:
    """The KB layout; index files live apart from notes so ``reindex --force`` can wipe them."""

    root: Path
    documents: Path
    index: Path
    graph: Path


def kb_paths(kb: str | os.PathLike[str], *, create: bool = True) -> KBPaths:
    """Resolve (and by default create) ``documents/``, ``index/`` and ``index/graph/``.

    The root is what the user configured (``GLOBAL_LEARNINGS_PATH``) and may be a link; the
    directories below it may not. A KB kept in git can carry a ``documents`` that is a
    symbolic link, and every note written through it — and the ``chmod 0700`` that makes it
    private — would land on whatever it points at, so it is refused with one line
    (:func:`check_kb_dirs`).

    Args:
        kb: The KB root directory.
        create: Create the three directories (and parents) when missing.

    Returns:
        The root and the three directories under it.

    Raises:
        UnsafePath: ``documents/``, ``index/`` or ``index/graph/`` is a symbolic link.
    """
    root = Path(kb)
    paths = KBPaths(root, root / "documents", root / "index", root / "index" / "graph")
    check_kb_dirs(root)
    if create:
        for directory in (root, paths.documents, paths.index, paths.graph):
            private_dir(directory)  # the KB holds excerpts of private sessions
    return paths


def check_kb_dirs(kb: str | os.PathLike[str]) -> None:
    """Refuse a KB whose ``documents/``, ``index/`` or ``index/graph/`` is a symbolic link.

    Args:
        kb: The KB root (itself followed: the user configured it).

    Raises:
        UnsafePath: One line naming the link and the fix.
    """
    for parts in (("documents",), ("index",), ("index", "graph")):
        link = linked_part(kb, *parts)
        if link is not None:
            raise UnsafePath(
                0,
                f"{link} is a symbolic link: refused (notes are read and written only in a"
                f" real directory; point GLOBAL_LEARNINGS_PATH at the real KB instead)",
                link,
            )


def iter_notes(kb: str | os.PathLike[str]) -> Iterator[Path]:
    """``documents/*.md`` in sorted order (stable reindex order); hidden temp files skipped.

    Only regular files: a note that is a symbolic link is never listed (nor read), so a
    link planted in a synced ``documents/`` cannot make us read what it points at.

    Args:
        kb: The KB root directory.

    Returns:
        An iterator over the note paths (empty when ``documents/`` does not exist or is a
        link); the listing is taken when this is called, not as it is iterated.
    """
    documents = Path(kb) / "documents"
    if documents.is_symlink() or not documents.is_dir():
        return iter(())
    with os.scandir(documents) as entries:
        names = sorted(
            e.name
            for e in entries
            if e.name.endswith(".md")
            and not e.name.startswith(".")
            and e.is_file(follow_symlinks=False)
        )
    return iter([documents / n for n in names])


def sidecar_path_for(note_path: Path) -> Path:
    """``<id>.md`` → ``<id>.entities.yaml``.

    Args:
        note_path: The note's path.

    Returns:
        The sidecar's path, in the same directory.
    """
    return note_path.with_name(note_path.stem + SIDECAR_SUFFIX)


def content_hash(text: str) -> str:
    """sha256 of the UTF-8 note bytes, exactly as written.

    Args:
        text: The note's text.

    Returns:
        The hex digest (64 characters).
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _note_file(note_id: str, path: Path, text: str) -> NoteFile:
    return NoteFile(note_id, path, sidecar_path_for(path), content_hash(text))


def write_learning(
    kb: str | os.PathLike[str],
    learning: Mapping[str, object],
    *,
    created: str,
    updated: str,
    source_path: str | None,
    session_id: str | None,
    extra: Mapping[str, object] | None = None,
    status: str = "active",
) -> NoteFile:
    """Write (or overwrite) the note and sidecar for ``learning``; return the note's location.

    The id is content-derived, so re-adding the same learning overwrites its file: the
    existing note's ``created`` and its lifecycle keys (``sources``, ``proof_count``) are
    kept. The sidecar is written first so that a reader never sees a note whose entities are
    still missing (it would fall back to heuristic extraction). Raises :class:`NoteError`
    when the title is empty or what was written does not parse back.

    Args:
        kb: The KB root directory (its directories are created when missing).
        learning: The model's learning; ``title`` and ``rule`` give the id.
        created: ISO timestamp used when no note with this id exists yet.
        updated: ISO timestamp of this write (also the sidecar's ``extracted_at``).
        source_path: The transcript it came from, or ``None``.
        session_id: The harness session, or ``None``.
        extra: More frontmatter keys (see :func:`reflect_jobs.kb.render.note_frontmatter`);
            they win over the kept ``sources``/``proof_count``.
        status: The note's status, ``"active"`` unless told otherwise (an existing note's
            status is not kept).

    Returns:
        The note's id, path, sidecar path and content hash.

    Raises:
        NoteError: The title is empty, or the note or sidecar does not parse back with the
            expected id.
        ValueError: ``status`` is not a known note status.
        OSError: A write failed (a sidecar this call created is removed again).
    """
    title = str(learning.get("title") or "").strip()
    if not title:
        raise NoteError("CREATE missing learning.title")
    note_id = learning_id(title, str(learning.get("rule") or ""))
    documents = kb_paths(kb).documents
    path = documents / f"{note_id}.md"
    merged_extra = dict(extra or {})
    if path.exists():
        try:
            old = parse_note(path).frontmatter
        except NoteError:
            old = {}
        if isinstance(old.get("created"), str) and old["created"]:
            created = old["created"]
        for key in ("sources", "proof_count", *KEPT_ON_REWRITE):
            if key in old and key not in merged_extra:
                merged_extra[key] = old[key]
    sidecar = sidecar_path_for(path)
    sidecar_existed = sidecar.exists()
    text = render_note(
        learning,
        note_id=note_id,
        created=created,
        updated=updated,
        source_path=source_path,
        session_id=session_id,
        status=status,
        extra=merged_extra,
    )
    atomic_write(sidecar, render_sidecar_data(_sidecar_for(note_id, learning, text, updated)))
    try:
        atomic_write(path, text)
    except OSError:
        # A full disk between the two writes must not leave a sidecar with no note.
        if not sidecar_existed and not path.exists():
            with contextlib.suppress(OSError):
                sidecar.unlink()
        raise
    note = parse_note(path)
    side = load_sidecar(sidecar)
    if note.id != note_id or side["document_id"] != note_id:
        raise NoteError(f"{path}: id mismatch after write ({note.id!r}, {side['document_id']!r})")
    return _note_file(note_id, path, text)


def _sidecar_for(
    note_id: str, learning: Mapping[str, object], text: str, updated: str
) -> dict[str, object]:
    """The sidecar of a note: the model's entities, else the heuristic extractor's.

    A learning without entities (the heuristic writer's always, a model's sometimes) would
    otherwise get ``entities: []`` and leave the graph arm empty.
    """
    data = sidecar_data(note_id, learning, extracted_at=updated)
    if needs_heuristic_entities(data):
        guessed = heuristic_sidecar(parse_note(text))
        data["entities"] = guessed["entities"]
        data["relationships"] = guessed["relationships"]
    return data


def _rewrite(note: Note, updates: Mapping[str, object], drop: tuple[str, ...] = ()) -> NoteFile:
    """Re-render ``note`` with ``updates`` merged into its frontmatter (order kept) and the
    ``drop`` keys removed.

    The note's directory must not be a link (a ``documents/`` swapped for one after the
    note's path was recorded would carry the write elsewhere).
    """
    assert note.path is not None
    if note.path.parent.is_symlink():
        raise UnsafePath(0, f"{note.path.parent} is a symbolic link: refused", str(note.path))
    fm = {k: v for k, v in note.frontmatter.items() if k not in drop}
    fm.update(updates)
    text = render_frontmatter_note(fm, note.body)
    atomic_write(note.path, text)
    check = parse_note(note.path)
    if check.id != note.id or check.frontmatter.get("status") != fm.get("status"):
        raise NoteError(f"{note.path}: frontmatter update did not round-trip")
    return _note_file(note.id, note.path, text)


def retire_note(
    path: str | os.PathLike[str],
    *,
    status: str,
    reason: str,
    superseded_by: str | None = None,
    now: str,
) -> NoteFile:
    """Mark a note retired/superseded/archived/deleted in its frontmatter; the file stays.

    Keeping the file keeps history greppable and makes the action reversible; search and the
    indexes filter on ``status`` instead (ARCHITECTURE §7).

    Args:
        path: The note file.
        status: One of :data:`RETIRED_STATUSES` (any note status but ``active``).
        reason: Why; stored as ``retired_reason`` with whitespace collapsed.
        superseded_by: The id of the note that replaces it, stored when given.
        now: ISO timestamp stored as ``updated``.

    Returns:
        The rewritten note's id, path, sidecar path and new content hash.

    Raises:
        ValueError: ``status`` is not a retired status.
        NoteError: The note does not parse, or the rewrite does not round-trip.
    """
    if status not in RETIRED_STATUSES:
        raise ValueError(f"retire status must be one of {sorted(RETIRED_STATUSES)}")
    note = parse_note(Path(path))
    updates: dict[str, object] = {
        "status": status,
        "retired_reason": " ".join(str(reason).split()),
        "updated": now,
    }
    if superseded_by is not None:
        updates["superseded_by"] = superseded_by
    return _rewrite(note, updates)


def accept_note(path: str | os.PathLike[str], *, now: str) -> NoteFile:
    """Mark a ``proposed`` note ``active``: a person or a later session vouched for it.

    Args:
        path: The note file.
        now: ISO timestamp stored as ``updated``.

    Returns:
        The rewritten note's id, path, sidecar path and new content hash.

    Raises:
        NoteError: The note does not parse, or the rewrite does not round-trip.
    """
    note = parse_note(Path(path))
    if note.frontmatter.get("status") == ACTIVE:
        text = Path(path).read_text(encoding="utf-8")
        return _note_file(note.id, Path(path), text)
    return _rewrite(note, {"status": ACTIVE, "updated": now})


#: Frontmatter a re-add of the same learning keeps (besides ``sources``/``proof_count``):
#: its confirmations (``ledger/confirmations.py``) and its own TTL (``recall/fading.py``).
KEPT_ON_REWRITE = ("confirmations", "last_confirmed", "forget_after")


def confirm_note(
    path: str | os.PathLike[str], *, confirmations: int, last_confirmed: str
) -> NoteFile:
    """Record the ledger's confirmations of a note (``confirmations``, ``last_confirmed``).

    ``updated`` is left alone: a confirmation is a use, not a change of the learning. Set
    as given (the ledger's figures), so applying it twice is harmless.

    Args:
        path: The note file.
        confirmations: The ledger's count.
        last_confirmed: ISO timestamp of the last confirmation.

    Returns:
        The rewritten note's id, path, sidecar path and new content hash.

    Raises:
        NoteError: The note does not parse, or the rewrite does not round-trip.
    """
    note = parse_note(Path(path))
    fm = note.frontmatter
    if fm.get("confirmations") == int(confirmations) and fm.get("last_confirmed") == last_confirmed:
        return _note_file(note.id, Path(path), Path(path).read_text(encoding="utf-8"))
    return _rewrite(note, {"confirmations": int(confirmations), "last_confirmed": last_confirmed})


#: The frontmatter key of a learning written to go global but told only in its repository
#: until a second session or a person confirms it (``pipeline/global_cap.py``).
PROPOSED_SCOPE = "proposed_scope"


def is_pending_global(fm: Mapping[str, object]) -> bool:
    """Whether a note's frontmatter makes it a pending global: ``scope: repo`` with
    ``proposed_scope: global`` (told only in its repository until confirmed).

    The one test of it: the ledger's ``learnings.proposed_scope`` (migration 0012), which
    ``status`` counts and ``review`` lists (``pipeline/global_cap.py``), is set by it — when
    the add writes the note, by ``db rebuild`` and by the migration's backfill.

    Args:
        fm: A parsed note's frontmatter.

    Returns:
        True for a pending global learning.
    """
    return str(fm.get(PROPOSED_SCOPE) or "").strip().lower() == "global" and (
        str(fm.get("scope") or "").strip().lower() == "repo"
    )


def promote_note(path: str | os.PathLike[str], *, now: str) -> NoteFile:
    """Make a pending global note global: ``scope: global``, its ``repo`` and
    ``proposed_scope`` dropped (a second session or a person confirmed it).

    Args:
        path: The note file.
        now: ISO timestamp stored as ``updated``.

    Returns:
        The note's id, path, sidecar path and content hash (an already global note is left
        as it is).

    Raises:
        NoteError: The note does not parse, or the rewrite does not round-trip.
    """
    note = parse_note(Path(path))
    fm = note.frontmatter
    if fm.get("scope") == "global" and PROPOSED_SCOPE not in fm:
        return _note_file(note.id, Path(path), Path(path).read_text(encoding="utf-8"))
    return _rewrite(note, {"scope": "global", "updated": now}, drop=("repo", PROPOSED_SCOPE))


def restore_note(path: str | os.PathLike[str], *, now: str) -> NoteFile:
    """Bring a retired, superseded, archived or otherwise withheld note back: ``active``.

    ``retired_reason``, ``superseded_by`` and a ``forget_after`` that took it out are dropped
    (the ledger's history keeps why it had left circulation; a person who restores it wants
    it kept); an already active note is left as it is.

    Args:
        path: The note file.
        now: ISO timestamp stored as ``updated``.

    Returns:
        The note's id, path, sidecar path and content hash.

    Raises:
        NoteError: The note does not parse, or the rewrite does not round-trip.
    """
    note = parse_note(Path(path))
    fm = note.frontmatter
    if fm.get("status") == ACTIVE and not fm.get("superseded_by"):
        return _note_file(note.id, Path(path), Path(path).read_text(encoding="utf-8"))
    return _rewrite(
        note,
        {"status": ACTIVE, "updated": now},
        drop=("retired_reason", "superseded_by", "forget_after"),
    )


#: The most ``applies_when`` phrases a note keeps as confirmations add theirs (the oldest go).
MAX_NOTE_PHRASES = 6


def bump_note(
    path: str | os.PathLike[str],
    *,
    source: str,
    proof_count: int,
    now: str,
    phrases: list[str] | None = None,
) -> NoteFile:
    """Record another source confirming the note (an UPDATE action) and its proof count.

    Args:
        path: The note file.
        source: The confirming source (whitespace collapsed); appended to ``sources``
            unless empty or already listed.
        proof_count: The new ``proof_count``, stored as given (not incremented here).
        now: ISO timestamp stored as ``updated``.
        phrases: The confirming session's words for the task (``applies_when``), added
            to the note's unless it holds them already (case aside); the newest
            :data:`MAX_NOTE_PHRASES` are kept, so a note written before the field, or in
            other words, learns how people ask for it. Applying twice adds nothing.

    Returns:
        The rewritten note's id, path, sidecar path and new content hash.

    Raises:
        NoteError: The note does not parse, or the rewrite does not round-trip.
    """
    note = parse_note(Path(path))
    sources = note.frontmatter.get("sources")
    sources = [str(s) for s in sources] if isinstance(sources, list) else []
    source = " ".join(str(source).split())
    if source and source not in sources:
        sources.append(source)
    updates: dict[str, object] = {
        "sources": sources,
        "proof_count": int(proof_count),
        "updated": now,
    }
    held = applies_when(note.frontmatter)
    known = {x.lower() for x in held}
    added = [x for x in applies_when({"applies_when": phrases}) if x.lower() not in known]
    if added:
        updates["applies_when"] = [*held, *added][-MAX_NOTE_PHRASES:]
    return _rewrite(note, updates)
