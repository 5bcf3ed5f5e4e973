"""Curation by hand: a person adds, forgets and restores learnings (issue 23, seed 003).

* ``add FILE``: a markdown file whose frontmatter needs only ``title`` and ``rule`` becomes a
  learning through the add stage's own pieces — the same normalisation and bounds as a
  model's CREATE (``writer/actions.py``), redaction, the anchors (``kb/anchors.py``), the
  one KB writer (``kb.write_learning``: the id is ``lrn-<slug>-<hash6>`` of title and rule),
  the add stage's ledger row (``pipeline/learning_rows.py:record_learning``) and its contradiction
  demotion. A person vouches for it, so it is active (told) at once.
* ``forget ID``: the ledger row becomes ``archived`` first, then the note (status
  ``archived``) and its sidecar move to ``documents/.forgotten/``; a re-run finishes what a
  crash left half done.
* ``restore ID``: the reverse, for any status that took the learning out of circulation
  (archived, superseded, retired, stale anchors, dormant…: ``lifecycle.is_restorable``).

Each ends by applying the touched notes to search and the context store at once
(``index/immediate.py``), so the next session start, search or MCP answer already agrees;
the coalesced reindex the caller asks for brings the graph/vector index along.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reflect_jobs import kb
from reflect_jobs.fsio import NotRegularFile, TooLarge, UnsafePath, read_regular
from reflect_jobs.index.immediate import apply_now
from reflect_jobs.invisible import strip_invisible
from reflect_jobs.kb import anchors
from reflect_jobs.kb.parse import NoteError, split_frontmatter
from reflect_jobs.ledger import confirmations, contradiction, learnings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.lifecycle import ACTIVE, ARCHIVED, FORGOTTEN_DIR, PROPOSED, is_restorable
from reflect_jobs.recall import fading, refresh
from reflect_jobs.redaction import redact_value
from reflect_jobs.repo import repo_for
from reflect_jobs.writer.actions import FIELD_MAX_CHARS, cap_learning, normalise_learning

from . import add, learning_rows, note_edits

#: The largest file ``add`` reads (a 5 MB rule is read, then refused by its field's bound).
MAX_ADD_BYTES = 8 * 1024 * 1024
#: Frontmatter keys ``add`` reads; any other is reported and ignored.
KNOWN_KEYS = frozenset(
    {"title", "rule", "scope", "category", "key_insight", "problem", "root_cause", "fix",
     "learning_type", "confidence", "confidence_num", "tags", "entities", "forget_after",
     "applies_to", "applies_when"}
)  # fmt: skip
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


class CurationError(ValueError):
    """Bad input or an unknown id: one line for the CLI (exit 1), nothing changed."""


@dataclass
class Added:
    """What ``add`` did."""

    id: str
    created: bool
    scope: str
    repo: str | None
    note_path: str
    demoted: list[str] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _now() -> str:
    return f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"


def read_learning(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[str]]:
    """Read and check a learning file a person wrote.

    Args:
        path: A markdown file: ``---`` frontmatter with ``title`` and ``rule`` (and optionally
            ``scope: repo|global``, ``category``, ``key_insight``, ``problem``,
            ``root_cause``, ``fix``, ``learning_type``, ``confidence``, ``tags``,
            ``forget_after``: a date, an ISO date-time or a TTL such as ``30d``), then the
            body.

    Returns:
        The learning as a CREATE's ``learning`` (normalised, invisible characters stripped,
        secrets redacted) and the frontmatter keys that were ignored.

    Raises:
        CurationError: Unreadable, not a regular file, too large, no frontmatter, invalid
            YAML, no ``title`` or ``rule``, a bad ``scope``, or a field over its bound.
    """
    shown = os.fspath(path)
    try:
        data = read_regular(path, max_bytes=MAX_ADD_BYTES, follow=True)
    except TooLarge:
        raise CurationError(f"{shown}: larger than {MAX_ADD_BYTES:,} bytes") from None
    except (NotRegularFile, UnsafePath):
        raise CurationError(f"{shown}: not a regular file") from None
    except FileNotFoundError:
        raise CurationError(f"{shown}: no such file") from None
    except OSError as exc:
        raise CurationError(f"{shown}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CurationError(f"{shown}: not UTF-8 text") from None
    try:
        raw_fm, body = split_frontmatter(text)
    except NoteError:
        raise CurationError(
            f"{shown}: no frontmatter (start the file with a '---' line, then `title:` and"
            " `rule:`, then a closing '---' line)"
        ) from None
    _check_lines(shown, raw_fm)
    import yaml

    try:
        fm = yaml.safe_load(raw_fm)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 2})" if where is not None else ""
        raise CurationError(f"{shown}: the frontmatter is not valid YAML{at}") from None
    if not isinstance(fm, dict):
        raise CurationError(f"{shown}: the frontmatter is not a mapping of keys to values")
    for key in ("title", "rule"):
        if not isinstance(fm.get(key), str) or not fm[key].strip():
            raise CurationError(f"{shown}: the frontmatter needs a non-empty `{key}`")
    scope = str(fm.get("scope") or "repo").strip().lower()
    if scope not in ("repo", "global"):
        raise CurationError(f"{shown}: scope must be `repo` or `global`, not {scope[:40]!r}")
    try:
        expires = fading.parse_forget_after(fm.get("forget_after"))
    except ValueError as exc:
        raise CurationError(f"{shown}: {exc}") from None
    if expires is not None and expires <= datetime.now(UTC):
        raise CurationError(f"{shown}: forget_after {fading.iso(expires)} is already past")
    raw = {k: v for k, v in fm.items() if k in KNOWN_KEYS and k != "forget_after"}
    if "confidence" in raw and "confidence_num" not in raw:
        raw["confidence_num"] = raw.pop("confidence")
    raw.setdefault("confidence_num", 0.8)  # a person wrote it down: more than a guess
    raw["body"] = body
    learning = normalise_learning(raw, scope)
    if not learning["key_insight"].strip():
        learning["key_insight"] = learning["rule"]
    for name, value in learning.items():
        if isinstance(value, str):
            learning[name] = strip_invisible(value)
    limits = [
        f"{name} is {len(learning[name]):,} characters; at most {limit:,}"
        for name, limit in FIELD_MAX_CHARS.items()
        if isinstance(learning.get(name), str) and len(learning[name]) > limit
    ]
    if limits:
        raise CurationError(f"{shown}: {limits[0]}")
    cap_learning(learning)  # list items: cut as a model's are (nothing else is over)
    if learning.get("learning_type") is None and isinstance(fm.get("learning_type"), str):
        learning["learning_type"] = fm["learning_type"]
    redacted, _ = redact_value(learning)
    if expires is not None:
        redacted["forget_after"] = fading.iso(expires)
    ignored = sorted(str(k) for k in fm if k not in KNOWN_KEYS)
    return redacted, ignored


def _check_lines(shown: str, raw_fm: str) -> None:
    """Refuse an oversized field before YAML reads it (a 5 MB rule must not cost seconds)."""
    longest = max(FIELD_MAX_CHARS.values())
    for line in raw_fm.splitlines():
        if len(line) <= longest + 64:
            continue
        key = line.split(":", 1)[0].strip()
        limit = FIELD_MAX_CHARS.get(key)
        if limit is not None:
            raise CurationError(f"{shown}: {key} is {len(line):,} characters; at most {limit:,}")
        raise CurationError(f"{shown}: a frontmatter line is {len(line):,} characters long")


def add_learning(
    kb_path: str | os.PathLike[str], db: str, path: str | os.PathLike[str], cwd: str
) -> Added:
    """``reflect-jobs add FILE``: write note + sidecar + ledger row; demote what it negates.

    Args:
        kb_path: The KB root.
        db: The ledger URL.
        path: The learning file.
        cwd: The directory whose repository a ``repo`` learning belongs to.

    Returns:
        The id and what happened.

    Raises:
        CurationError: Bad input (:func:`read_learning`) or an unknown directory.
    """
    learning, ignored = read_learning(path)
    ref = repo_for(os.path.abspath(cwd))
    if ref is None:
        raise CurationError(f"--cwd {cwd}: no such directory")
    if learning["scope"] == "repo":
        learning["repo"] = ref.key
    learning["anchors"] = anchors.find_anchors_many(
        [learning], ref.root, deadline=time.monotonic() + add.ANCHOR_BUDGET_SEC
    )[0]
    learning["status"] = ACTIVE  # a person vouches for it (no review)
    source = f"reflect-jobs add {os.path.abspath(path)}"
    now = _now()
    try:
        note = kb.write_learning(
            kb_path,
            learning,
            created=now,
            updated=now,
            source_path=os.path.abspath(path),
            session_id=None,
            status=ACTIVE,
            extra={"forget_after": learning["forget_after"]}
            if learning.get("forget_after")
            else None,
        )
    except (OSError, NoteError) as exc:
        raise CurationError(f"the note could not be written: {exc}") from None
    repo_key = ref.key if kb.note_scope(learning) == "repo" else None
    with session_scope(db) as session:
        res = learning_rows.record_learning(
            session,
            learning,
            note,
            source=source,
            session_id=None,
            signal_hash=None,
            job_id=None,
            repo_key=ref.key,
        )
        pairs = learning_rows.contradictions(session, [(learning, note)], ref.key)
        demoted = [
            old for old, new in pairs if contradiction.demote(session, old, new_id=new, job_id=None)
        ]
    edits = [note_edits.supersede(old, note.id, now) for old in demoted]
    problems = note_edits.apply_direct(db, edits) if edits else []
    problems += apply_now(kb_path, [note.id, *demoted])
    return Added(
        id=note.id,
        created=res.created,
        scope=kb.note_scope(learning),
        repo=repo_key,
        note_path=str(note.path),
        demoted=demoted,
        ignored_keys=ignored,
        problems=problems,
    )


def _check_id(learning_id: str) -> str:
    learning_id = str(learning_id or "").strip()
    if not learning_id or len(learning_id) > 200 or not set(learning_id) <= _ID_CHARS:
        raise CurationError(f"not a learning id: {learning_id[:80]!r}")
    return learning_id


def _move(src: Path, dst_dir: Path) -> None:
    """Move a note or sidecar into ``dst_dir`` (a rename: same file system, atomic)."""
    from reflect_jobs.perms import private_dir

    private_dir(dst_dir)
    os.replace(src, dst_dir / src.name)


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def forget(kb_path: str | os.PathLike[str], db: str, learning_id: str, *, by: str) -> str:
    """``reflect-jobs forget ID``: out of circulation everywhere, at once.

    Args:
        kb_path: The KB root.
        db: The ledger URL.
        learning_id: The learning's id.
        by: Who forgot it (in the ledger's history).

    Returns:
        ``"forgotten"``, or ``"already forgotten"``.

    Raises:
        CurationError: Not an id, or no note and no ledger row has it.
    """
    learning_id = _check_id(learning_id)
    paths = kb.kb_paths(kb_path)
    note = paths.documents / f"{learning_id}.md"
    away = paths.documents / FORGOTTEN_DIR
    with session_scope(db) as session:
        known = session.get(Learning, learning_id) is not None
    if not known and not _regular(note) and not _regular(away / note.name):
        raise CurationError(f"no learning {learning_id}")
    with session_scope(db) as session:
        learnings.archive(session, learning_id, reason=f"forgotten by {by}")
    if not _regular(note):
        apply_now(kb_path, [learning_id])
        return "already forgotten"
    with contextlib.suppress(OSError, NoteError, ValueError):  # unparseable: moved all the same
        kb.retire_note(note, status=ARCHIVED, reason=f"forgotten by {by}", now=_now())
    sidecar = note.with_name(learning_id + ".entities.yaml")
    if _regular(sidecar):
        _move(sidecar, away)
    _move(note, away)
    apply_now(kb_path, [learning_id])
    return "forgotten"


def _wake(kb_path: str | os.PathLike[str], db: str, learning_id: str) -> None:
    """A person's ``restore`` of a dormant learning: a confirmation (it is told again)."""
    with session_scope(db) as session:
        confirmations.record_confirmation(
            session, learning_id, by=confirmations.BY_PERSON, session_id=None
        )
    note_edits.apply_direct(db, [note_edits.confirm(learning_id, _now())])
    apply_now(kb_path, [learning_id])


def restore(kb_path: str | os.PathLike[str], db: str, learning_id: str, *, by: str) -> str:
    """``reflect-jobs restore ID``: back into circulation (search, context, MCP, ledger).

    Args:
        kb_path: The KB root.
        db: The ledger URL.
        learning_id: The learning's id.
        by: Who restored it (in the ledger's history).

    Returns:
        ``"restored (was <status>)"``, ``"woken (was dormant)"`` (an active learning nobody
        confirmed lately: the person's restore is a confirmation, ``recall/fading.py``) or
        ``"already active"``.

    Raises:
        CurationError: Not an id; no such learning; it waits for review; or a forgotten
            copy and a live note both exist.
    """
    learning_id = _check_id(learning_id)
    paths = kb.kb_paths(kb_path)
    note = paths.documents / f"{learning_id}.md"
    away = paths.documents / FORGOTTEN_DIR
    kept = away / note.name
    with session_scope(db, readonly=True) as session:
        row = session.get(Learning, learning_id)
        before = row.status if row is not None else None
        latest = row.is_latest if row is not None else True
    if before is None and not _regular(note) and not _regular(kept):
        raise CurationError(f"no learning {learning_id}")
    if _regular(kept) and _regular(note):
        raise CurationError(
            f"{learning_id}: both {note} and a forgotten copy in {away} exist; remove one"
        )
    if before == PROPOSED:
        raise CurationError(
            f"{learning_id} is waiting for review: `reflect-jobs review accept {learning_id}`"
        )
    if _regular(kept):
        sidecar = kept.with_name(learning_id + ".entities.yaml")
        if _regular(sidecar):
            _move(sidecar, paths.documents)
        _move(kept, paths.documents)
    try:
        fm = kb.parse_note(note).frontmatter
        on_note: str | None = str(fm.get("status") or ACTIVE)
    except NoteError:
        fm, on_note = {}, None
    # Either side may be the one a crash left behind: restore when either says so.
    was = before if is_restorable(before) else on_note
    if not (is_restorable(before) or is_restorable(on_note) or not latest):
        if fading.is_dormant(refresh.awake_of(fm), fading.unused_days(), time.time()):
            _wake(kb_path, db, learning_id)
            return "woken (was dormant)"
        apply_now(kb_path, [learning_id])
        return "already active"
    with session_scope(db) as session:
        try:
            learnings.restore(session, learning_id, reason=f"restored by {by}")
        except ValueError as exc:
            raise CurationError(str(exc)) from None
    try:
        kb.restore_note(note, now=_now())
    except (OSError, NoteError) as exc:
        raise CurationError(f"{learning_id}: the note could not be rewritten ({exc})") from None
    apply_now(kb_path, [learning_id])
    return f"restored (was {was})"
