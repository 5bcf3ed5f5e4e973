"""Turn a model's learning dict into a note and its entity sidecar (ARCHITECTURE §7, SPEC-drain §4.2).

Rendering is a pure function of its inputs so a re-drain of the same finding produces the
same bytes apart from timestamps; all escaping lives in :mod:`.yamlout`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from ..lifecycle import LEARNING_STATUSES, normalise_causal_type, normalise_learning_type
from .yamlout import clean_text, yaml_block

# Optional keys a later lifecycle step may add; rendered after the ARCHITECTURE §7 keys.
OPTIONAL_KEYS = ("sources", "proof_count", "superseded_by", "retired_reason")
#: ``evidence_origin`` values (``writer/evidence.py`` decides them).
EVIDENCE_ORIGINS = ("person", "assistant", "tool")
#: At most this many anchors per note (``kb/anchors.py``).
MAX_ANCHORS = 10
#: The heading of the section that ends a note with evidence.
EVIDENCE_HEADING = "## Evidence"
DEFAULT_CONFIDENCE = 0.6
_HEADING = re.compile(r"(?m)^## ")


def confidence_num(value: object) -> float:
    """Model confidence as a float in [0, 1]; anything unusable gets the drain's 0.6.

    Unlike the original we clamp: a "confidence 7" would otherwise read as certainty.

    Args:
        value: What the model gave: a number or numeric string; booleans, non-numbers and
            non-finite values count as unusable.

    Returns:
        The number clamped to [0.0, 1.0], or :data:`DEFAULT_CONFIDENCE` (0.6).
    """
    if isinstance(value, bool):
        return DEFAULT_CONFIDENCE
    try:
        num = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return DEFAULT_CONFIDENCE
    if not math.isfinite(num):
        return DEFAULT_CONFIDENCE
    return min(1.0, max(0.0, num))


def confidence_bucket(num: float) -> str:
    """high ≥ 0.8, medium ≥ 0.5, else low (SPEC-drain §4.2).

    Args:
        num: A confidence in [0, 1] (see :func:`confidence_num`).

    Returns:
        ``"high"``, ``"medium"`` or ``"low"``.
    """
    return "high" if num >= 0.8 else "medium" if num >= 0.5 else "low"


def note_scope(learning: Mapping[str, object]) -> str:
    """The note's ``scope``: ``repo`` only when the learning says so *and* names its repository.

    A repository learning whose repository is unknown (the transcript named no working
    directory) is written as global rather than lost to every session.

    Args:
        learning: The learning; ``scope`` (``repo``/``global``) and ``repo`` (the key from
            :func:`reflect_jobs.repo.repo_for`) are read.

    Returns:
        ``"repo"`` or ``"global"``.
    """
    repo = learning.get("repo")
    wants_repo = str(learning.get("scope") or "repo").strip().lower() != "global"
    return "repo" if wants_repo and isinstance(repo, str) and repo.strip() else "global"


def _text(value: object) -> str:
    return "" if value is None else clean_text(value)


def _str_list(value: object) -> list[str]:
    """A model list of strings; a bare string is ONE item (the original iterated its chars)."""
    if value is None:
        return []
    items: Iterable[object] = [value] if isinstance(value, str | Mapping) else value  # type: ignore[assignment]
    if not isinstance(items, Iterable):
        items = [items]
    out: list[str] = []
    for item in items:
        name = item.get("name") if isinstance(item, Mapping) else item
        text = " ".join(_text(name).split())
        if text and text not in out:
            out.append(text)
    return out


def applies_when(fields: Mapping[str, object]) -> list[str]:
    """The tasks or symptoms a learning matters in (its ``applies_when`` phrases).

    One reading for the note's writer and its indexes (the context store's full-text column,
    the lexical and vector documents), whatever a person or an older note put there.

    Args:
        fields: A learning or a note's frontmatter.

    Returns:
        The distinct non-empty phrases, white space folded; ``[]`` when there are none.
    """
    return _str_list(fields.get("applies_when"))


def causal_relations(value: object) -> list[dict[str, str]]:
    """``[{source, target, type}]`` with empty endpoints dropped and the type whitelisted.

    Args:
        value: The model's ``causal_relations``; anything but a list yields ``[]``, and items
            that are not mappings are skipped.

    Returns:
        One dict per relation whose source and target are non-empty after whitespace is
        collapsed, with ``type`` passed through :func:`causal_type`.
    """
    if not isinstance(value, list):
        return []
    out = []
    for rel in value:
        if not isinstance(rel, Mapping):
            continue
        source = " ".join(_text(rel.get("source")).split())
        target = " ".join(_text(rel.get("target")).split())
        if source and target:
            out.append(
                {"source": source, "target": target, "type": normalise_causal_type(rel.get("type"))}
            )
    return out


def render_body(learning: Mapping[str, object]) -> str:
    """The model's markdown body; wrapped in Problem/Solution/Context if it has no heading.

    Args:
        learning: The model's learning; ``body``, and when the body has no ``## `` heading
            also ``problem`` and ``fix``, are read.

    Returns:
        The stripped body as is when it has a ``## `` heading, else ``## Problem`` /
        ``## Solution`` / ``## Context`` sections holding ``problem``, ``fix`` and the body.
    """
    body = _text(learning.get("body")).strip()
    if _HEADING.search(body):
        return body
    problem = _text(learning.get("problem")).strip()
    fix = _text(learning.get("fix")).strip()
    return f"## Problem\n{problem}\n\n## Solution\n{fix}\n\n## Context\n{body}".rstrip()


def note_frontmatter(
    learning: Mapping[str, object],
    *,
    note_id: str,
    created: str,
    updated: str,
    source_path: str | None,
    session_id: str | None,
    status: str = "active",
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The ordered frontmatter mapping (ARCHITECTURE §7 key order, then optional keys, then extra).

    Args:
        learning: The model's learning (``title``, ``rule``, ``tags``, ``confidence_num``…);
            every value is cleaned, and unknown enums fall back to their defaults.
        note_id: The note's id (see :func:`reflect_jobs.kb.ids.learning_id`).
        created: ISO timestamp of the first write.
        updated: ISO timestamp of this write.
        source_path: The transcript the learning came from; omitted when ``None``.
        session_id: The harness session; omitted when ``None``.
        status: One of :data:`reflect_jobs.lifecycle.LEARNING_STATUSES`.
        extra: More keys: the :data:`OPTIONAL_KEYS` (when not ``None``) go right after
            ``status``, other keys after them; none of them replaces a core key.

    Returns:
        The frontmatter, in the order it is rendered.

    Raises:
        ValueError: ``status`` is not a known learning status.
    """
    if status not in LEARNING_STATUSES:
        raise ValueError(f"unknown note status {status!r}")
    num = confidence_num(learning.get("confidence_num"))
    fm: dict[str, object] = {
        "type": "learning",
        "id": note_id,
        "created": _text(created),
        "updated": _text(updated),
        "scope": note_scope(learning),
        "confidence": confidence_bucket(num),
        "confidence_num": num,
        "learning_type": normalise_learning_type(learning.get("learning_type")),
        "title": _text(learning.get("title")),
        "tags": _str_list(learning.get("tags")),
        "key_insight": _text(learning.get("key_insight")),
        "problem": _text(learning.get("problem")),
        "root_cause": _text(learning.get("root_cause")),
        "fix": _text(learning.get("fix")),
        "rule": _text(learning.get("rule")),
        "category": _text(learning.get("category")).strip() or "Unknown",
        "entities": _str_list(learning.get("entities")),
        "causal_relations": causal_relations(learning.get("causal_relations")),
    }
    applies = _str_list(learning.get("applies_to"))
    if applies:  # what it is about (recall/stack.py); inferred from tags/entities when absent
        fm["applies_to"] = applies
    # The tasks it matters in: what a later prompt is matched against (recall/relevance.py).
    when = applies_when(learning)
    if when:
        fm["applies_when"] = when
    evidence = " ".join(_text(learning.get("evidence")).split())
    if evidence:  # what proves it (ARCHITECTURE §6); notes from before evidence have none
        fm["evidence"] = evidence
        origin = _text(learning.get("evidence_origin")).strip()
        if origin in EVIDENCE_ORIGINS:
            fm["evidence_origin"] = origin
        fm["anchors"] = anchors_value(learning.get("anchors"))
    if fm["scope"] == "repo":
        fm["repo"] = " ".join(_text(learning.get("repo")).split())
    if source_path is not None:
        fm["source_path"] = _text(source_path)
    if session_id is not None:
        fm["session_id"] = _text(session_id)
    fm["status"] = status
    extra = dict(extra or {})
    for key in OPTIONAL_KEYS:
        if extra.get(key) is not None:
            fm[key] = extra.pop(key)
    for key, value in extra.items():
        if key not in fm:  # extra never overrides the rendered core keys
            fm[key] = value
    return fm


def anchors_value(value: object) -> list[dict[str, str]]:
    """``[{path, symbol?}]`` as stored in a note: strings only, at most :data:`MAX_ANCHORS`.

    Args:
        value: The learning's ``anchors`` (from ``kb/anchors.py``; any value tolerated).

    Returns:
        One mapping per item with a non-empty ``path`` (and ``symbol`` when non-empty).
    """
    out: list[dict[str, str]] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, Mapping):
            continue
        path = " ".join(_text(item.get("path")).split())
        symbol = " ".join(_text(item.get("symbol") or "").split())
        if path:
            out.append({"path": path, "symbol": symbol} if symbol else {"path": path})
        if len(out) >= MAX_ANCHORS:
            break
    return out


#: What the note's Evidence section says each origin is.
_ORIGIN_WORDS = {
    "person": "the person's own words",
    "assistant": "the assistant's text",
    "tool": "text the session read (a tool's output, a file or a web page)",
}


def evidence_section(learning: Mapping[str, object], *, session_id: str | None, at: str) -> str:
    """The note's ``## Evidence`` section: the quote, whose words, which session, when.

    Args:
        learning: The learning; ``evidence``, ``evidence_origin`` and ``harness`` are read.
        session_id: The harness session it was learned in.
        at: When it was learned (ISO timestamp).

    Returns:
        The section (no trailing newline), or ``""`` when the learning has no evidence.
    """
    quote = " ".join(_text(learning.get("evidence")).split())
    if not quote:
        return ""
    origin = _ORIGIN_WORDS.get(_text(learning.get("evidence_origin")).strip(), "the session")
    harness = " ".join(_text(learning.get("harness") or "").split())
    where = f"session `{_text(session_id or 'unknown')}`" + (f" ({harness})" if harness else "")
    return f"{EVIDENCE_HEADING}\n\n> {quote}\n\nQuoted from {origin}, {where}, {_text(at)}."


def without_evidence(body: str) -> str:
    """A note's body without the ``## Evidence`` section :func:`render_note` ends it with.

    Args:
        body: The note's body.

    Returns:
        The body up to its last Evidence heading (the whole body when it has none).
    """
    head, sep, _ = body.rpartition(f"\n{EVIDENCE_HEADING}\n")
    if sep:
        return head.rstrip()
    return "" if body.startswith(f"{EVIDENCE_HEADING}\n") else body


def render_frontmatter_note(frontmatter: Mapping[str, object], body: str) -> str:
    """Assemble ``---`` / frontmatter / ``---`` / body; the only place the fences are written.

    Args:
        frontmatter: The mapping to emit (see :func:`reflect_jobs.kb.yamlout.yaml_block`).
        body: The markdown body; stripped.

    Returns:
        The note's text: fences, one blank line, the body, one final newline.
    """
    return f"---\n{yaml_block(frontmatter)}\n---\n\n{_text(body).strip()}\n"


def render_note(
    learning: Mapping[str, object],
    *,
    note_id: str,
    created: str,
    updated: str,
    source_path: str | None,
    session_id: str | None,
    status: str = "active",
    extra: Mapping[str, object] | None = None,
) -> str:
    """The full markdown note for ``learning`` (see :func:`note_frontmatter`).

    Args:
        learning: The model's learning.
        note_id: The note's id.
        created: ISO timestamp of the first write.
        updated: ISO timestamp of this write.
        source_path: The transcript it came from, or ``None``.
        session_id: The harness session, or ``None``.
        status: One of :data:`NOTE_STATUSES`.
        extra: More frontmatter keys, as for :func:`note_frontmatter`.

    Returns:
        The note's text: frontmatter, :func:`render_body` and, for a learning with
        evidence, :func:`evidence_section`.

    Raises:
        ValueError: ``status`` is not a known note status.
    """
    fm = note_frontmatter(
        learning,
        note_id=note_id,
        created=created,
        updated=updated,
        source_path=source_path,
        session_id=session_id,
        status=status,
        extra=extra,
    )
    body = render_body(learning)
    section = evidence_section(learning, session_id=session_id, at=updated)
    return render_frontmatter_note(fm, f"{body}\n\n{section}" if section else body)


def sidecar_data(
    note_id: str, learning: Mapping[str, object], *, extracted_at: str
) -> dict[str, object]:
    """Sidecar mapping: the learning's entities plus every causal endpoint as an entity.

    Endpoints are added (type ``concept``) because a relationship whose end is not an entity
    becomes a dangling edge in the graph index.

    Args:
        note_id: The note's id, stored as ``document_id``.
        learning: The model's learning; ``entities`` (strings, or mappings with ``name``,
            ``type`` and ``description``) and ``causal_relations`` are read.
        extracted_at: ISO timestamp of the extraction.

    Returns:
        ``{"document_id", "extracted_at", "entities", "relationships"}``. Entities are
        de-duplicated case-insensitively; string entities get type ``technology``, causal
        endpoints ``concept``. Each relationship is a causal relation with an empty
        ``description`` and ``strength`` 5.
    """
    entities: list[dict[str, object]] = []
    seen: set[str] = set()

    def add(name: str, etype: str, description: str = "") -> None:
        if name.lower() not in seen:
            seen.add(name.lower())
            entities.append({"name": name, "type": etype, "description": description})

    raw = learning.get("entities")
    for item in raw if isinstance(raw, list) else _str_list(raw):
        if isinstance(item, Mapping):
            name = " ".join(_text(item.get("name")).split())
            if name:
                etype = " ".join(_text(item.get("type")).split()) or "technology"
                add(name, etype, " ".join(_text(item.get("description")).split()))
        else:
            for name in _str_list(item):
                add(name, "technology")
    relationships = []
    for rel in causal_relations(learning.get("causal_relations")):
        add(rel["source"], "concept")
        add(rel["target"], "concept")
        relationships.append({**rel, "description": "", "strength": 5})
    return {
        "document_id": note_id,
        "extracted_at": _text(extracted_at),
        "entities": entities,
        "relationships": relationships,
    }


def render_sidecar_data(data: Mapping[str, object]) -> str:
    """Serialise a sidecar mapping with the same safe emitter as the notes.

    Args:
        data: The sidecar mapping (see :func:`sidecar_data`).

    Returns:
        The YAML text, ending in a newline.
    """
    return yaml_block(data) + "\n"


def render_sidecar(note_id: str, learning: Mapping[str, object], *, extracted_at: str) -> str:
    """``<id>.entities.yaml`` text (ARCHITECTURE §7): document_id, extracted_at, entities, relationships.

    Args:
        note_id: The note's id.
        learning: The model's learning (see :func:`sidecar_data`).
        extracted_at: ISO timestamp of the extraction.

    Returns:
        The sidecar's YAML text, ending in a newline.
    """
    return render_sidecar_data(sidecar_data(note_id, learning, extracted_at=extracted_at))
