"""The notes as the indexes read them: listed and read safely, and each index's document.

Split from :mod:`.maintenance` (the reindex): how a note file is found (``documents/*.md``,
links skipped), read (bounded, ``O_NOFOLLOW`` below the KB root) and digested, and what it
becomes in the lexical index (:func:`lex_doc`) and in the graph/vector index
(:func:`doc_text`, :func:`graph_sidecar`). :mod:`.immediate` writes one note through the same
documents, so a person's change and a reindex index a note alike.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from reflect_jobs import kb
from reflect_jobs.fsio import read_inside
from reflect_jobs.kb.parse import MAX_NOTE_BYTES
from reflect_jobs.kb.render import applies_when
from reflect_jobs.lifecycle import ACTIVE, PROPOSED, is_retired


def sha(data: bytes) -> str:
    """A note's content digest, the one the lexical index and the manifest store.

    Args:
        data: The note file's bytes.

    Returns:
        Their SHA-256, hex.
    """
    return hashlib.sha256(data).hexdigest()


def note_entries(documents: Path) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    """The note files of ``documents/``, listed with one stat each.

    scandir + plain strings and ints: at 5,000 notes pathlib's globbing, sorting and
    per-path objects cost more than the whole incremental reindex should, and at 100,000 a
    stat object per note is memory the pass does not need.

    Args:
        documents: The KB's ``documents/`` folder.

    Returns:
        ``(name, path, size, mtime_ns)`` of the regular ``documents/*.md`` sorted by name,
        and the names of those that are symbolic links (skipped, never followed or read);
        both empty when the folder does not exist.
    """
    entries: list[tuple[str, str, int, int]] = []
    links: list[str] = []
    try:
        with os.scandir(documents) as it:
            for e in it:
                if not e.name.endswith(".md") or e.name.startswith("."):
                    continue
                if e.is_symlink():
                    links.append(e.name)
                elif e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    entries.append((e.name, e.path, st.st_size, st.st_mtime_ns))
    except FileNotFoundError:
        return [], []
    entries.sort(key=lambda x: x[0])
    return entries, sorted(links)


def note_bytes(path: Path) -> bytes:
    """A note file's bytes: a regular file, neither it nor ``documents/`` a link, bounded.

    Bounded by :data:`kb.parse.MAX_NOTE_BYTES`; opened below the KB root with
    ``O_NOFOLLOW`` on each component (:func:`reflect_jobs.fsio.read_inside`), so it is
    inside ``documents/``.

    Args:
        path: ``<kb>/documents/<name>.md``.

    Returns:
        The file's bytes.

    Raises:
        OSError: Not a regular file, a link on the way, too large, or unreadable.
    """
    return read_inside(path.parent.parent, path.parent.name, path.name, max_bytes=MAX_NOTE_BYTES)


def lex_doc(note: kb.Note, digest: str, status: str) -> dict[str, str]:
    """The lexical index's document of one note (for ``LexicalIndex.upsert_many``).

    Args:
        note: A parsed note with its ``path``.
        digest: Its bytes' :func:`sha`.
        status: Its frontmatter status.

    Returns:
        The row: ``doc_id``, ``title``, ``rule`` (rule, key insight and the tasks it
        applies when, weighted over the body), ``body``, ``path``, ``content_hash`` and
        ``status`` (retired and proposed kept as they are, anything else ``active``).
    """
    fm = note.frontmatter
    # The rule and key insight are what a learning says, and the tasks it matters in
    # (``applies_when``) how a person asks for it: weighted over the body (lexical.WEIGHTS).
    rule = " ".join(str(fm.get(k) or "") for k in ("rule", "key_insight"))
    when = "; ".join(applies_when(fm))
    if when:
        rule += " " + when
    fields = ("problem", "root_cause", "fix", "tags", "entities")
    text = " ".join(str(fm.get(k) or "") for k in fields)
    return {
        "doc_id": note.id,
        "title": str(fm.get("title", "")),
        "rule": rule,
        "body": text + "\n" + note.body,
        "path": str(note.path),
        "content_hash": digest,
        # proposed notes are found by search, marked; retired ones are filtered out
        "status": status if is_retired(status) or status == PROPOSED else ACTIVE,
    }


def graph_sidecar(note: kb.Note) -> dict:
    """The entities and relationships a note enters the graph with.

    Its ``<id>.entities.yaml`` when that holds entities; otherwise — no sidecar, a broken
    one, or one with ``entities: []`` (a note written before the add stage filled them in,
    or edited by hand) — the heuristic extractor's, so no note is an island in the graph.

    Args:
        note: A parsed note with its ``path``.

    Returns:
        A sidecar mapping (``document_id``, ``entities``, ``relationships``).
    """
    sidecar = None
    if note.path is not None:
        sidecar_path = note.path.with_name(note.path.stem + ".entities.yaml")
        try:
            sidecar = kb.load_sidecar(sidecar_path) if sidecar_path.exists() else None
        except kb.NoteError:
            sidecar = None
    if sidecar is None or not sidecar.get("entities"):
        sidecar = kb.heuristic_sidecar(note)
    return sidecar


def doc_text(note: kb.Note) -> str:
    """The text a note is indexed under in the graph/vector index.

    The frontmatter fields a person searches by (title, key insight, problem, root cause,
    fix, rule, the tasks it applies when) as ``key: value`` lines, then the body without its
    Evidence section, so a query matching the summary of a learning finds it even when the
    body is long.

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
    when = "; ".join(applies_when(fm))
    if when:
        head += f"\napplies when: {when}"
    # What the learning says, not the quote that proves it (its Evidence section): a
    # near-duplicate of another session's learning must stay a semantic twin.
    return f"{head}\n\n{kb.without_evidence(note.body)}"


def iter_active(kb_path: Path) -> Iterator[tuple[kb.Note, str]]:
    """Every active note with its digest, one at a time (streamed: never a list of all).

    Args:
        kb_path: The KB root.

    Yields:
        ``(note, digest)`` of each note that reads, parses and is not retired.
    """
    for path in kb.iter_notes(kb_path):
        try:
            data = note_bytes(path)
            note = kb.parse_note(data.decode("utf-8", errors="replace"))
        except (OSError, kb.NoteError):
            continue
        note.path = path
        if not is_retired(note.frontmatter.get("status")):
            yield note, sha(data)


def all_active(kb_path: Path) -> list[tuple[kb.Note, str]]:
    """Every active note with its digest, as a list (the graph's full rebuild).

    Args:
        kb_path: The KB root.

    Returns:
        :func:`iter_active`'s pairs.
    """
    return list(iter_active(kb_path))
