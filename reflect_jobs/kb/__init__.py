"""The markdown knowledge base: ids, rendering, parsing, atomic writes, lifecycle.

Notes (``kb/documents/<id>.md``) are the source of truth; everything under ``kb/index/`` is
derived and rebuildable. See ARCHITECTURE §7 and SPEC-drain §4.2 / §7.
"""

from ..fsio import atomic_write
from .heuristic import heuristic_sidecar
from .ids import learning_id, slugify
from .parse import Note, NoteError, load_sidecar, normalize_sidecar, parse_note
from .render import note_scope, render_note, render_sidecar, without_evidence
from .store import (
    PROPOSED_SCOPE,
    KBPaths,
    NoteFile,
    accept_note,
    bump_note,
    confirm_note,
    is_pending_global,
    iter_notes,
    kb_paths,
    promote_note,
    restore_note,
    retire_note,
    write_learning,
)
from .yamlout import yaml_scalar

__all__ = [
    "KBPaths",
    "Note",
    "NoteError",
    "NoteFile",
    "accept_note",
    "atomic_write",
    "bump_note",
    "confirm_note",
    "heuristic_sidecar",
    "is_pending_global",
    "iter_notes",
    "kb_paths",
    "learning_id",
    "load_sidecar",
    "note_scope",
    "normalize_sidecar",
    "parse_note",
    "promote_note",
    "PROPOSED_SCOPE",
    "render_note",
    "render_sidecar",
    "restore_note",
    "retire_note",
    "slugify",
    "without_evidence",
    "write_learning",
    "yaml_scalar",
]
