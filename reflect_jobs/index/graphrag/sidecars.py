"""A note and its sidecar, turned into the records nano-graphrag parses and stores.

Entities and relationships come from the note's own sidecar, never from a model.  This module
renders them in nano-graphrag's extraction-answer format (tuple/record delimiters, quoted
fields) after sanitising every value, and predicts the *normalised* names and descriptions
nano-graphrag will store for them (``clean_str`` of the upper-cased quoted name, ...).  The
index keeps those normalised contributions per note in its manifest, so removing a note can
recompute what is left of a shared node or edge without re-reading any other note.

A note without entities gets a placeholder entity named after its id, so it is still in the
graph (local search finds it).  :func:`summarize_descriptions` is the deterministic stand-in
for nano-graphrag's entity-summary LLM call.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from nano_graphrag._utils import clean_str
from nano_graphrag.prompt import PROMPTS

from reflect_jobs.lifecycle import DEFAULT_CAUSAL_TYPE

TUPLE_DELIMITER = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
RECORD_DELIMITER = PROMPTS["DEFAULT_RECORD_DELIMITER"]
COMPLETION_DELIMITER = PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
SUMMARY_MAX_CHARS = 600  # well under entity_summary_to_max_tokens (500 tokens)

_TD, _RD, _CD = TUPLE_DELIMITER, RECORD_DELIMITER, COMPLETION_DELIMITER


@dataclass
class IndexDoc:
    """One note as the index sees it.

    Attributes:
        id: The note id (the manifest key; a changed note keeps it).
        text: The note's markdown text (chunked and embedded).
        sidecar: The note's sidecar (``entities``, ``relationships``), may be empty.
    """

    id: str
    text: str
    sidecar: dict = field(default_factory=dict)


def _sanitize(value: Any) -> str:
    """Make a value safe inside a quoted tuple field of nano-graphrag's record format."""
    s = "" if value is None else str(value)
    for bad in (_CD, _TD, _RD, '"'):
        s = s.replace(bad, " ")
    s = re.sub(r"[\x00-\x1f\x7f]+", " ", s)  # newlines would break the record regex
    return re.sub(r"\s{2,}", " ", s).strip()


def _norm_name(raw: str) -> str:
    """The node name nano-graphrag derives from a sanitised name (quotes included, upper)."""
    return clean_str(f'"{raw}"'.upper())


def _norm_desc(raw: str) -> str:
    return clean_str(f'"{raw}"')


def _strength(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 5.0
    return v if math.isfinite(v) else 5.0


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


@dataclass
class Contribution:
    """A note's normalised graph contribution, as nano-graphrag will store it."""

    entity_records: str = ""  # records for every chunk
    relation_records: str = ""  # records for the first chunk only
    entities: list[list[str]] = field(default_factory=list)  # [name, type, desc]
    edges: list[list[Any]] = field(default_factory=list)  # [a, b, desc, weight] with a <= b


def sidecar_contribution(doc: IndexDoc) -> Contribution:
    """Render a note's sidecar as extraction records plus its normalised contribution.

    Args:
        doc: The note; malformed sidecar entries (not dicts, no name/source/target) are
            skipped, a missing strength counts as 5.

    Returns:
        The records the passthrough LLM answers with (entities for every chunk, relationships
        for the first) and the normalised ``[name, type, desc]`` entities and
        ``[a, b, desc, weight]`` edges (``a <= b``) the manifest keeps.
    """
    sc = doc.sidecar or {}
    ent_recs: list[str] = []
    entities: list[list[str]] = []
    for e in sc.get("entities") or []:
        if not isinstance(e, dict):
            continue
        name = _sanitize(e.get("name"))
        if not name:
            continue
        etype = _sanitize(e.get("type") or "concept") or "concept"
        desc = _sanitize(e.get("description") or "")
        ent_recs.append(f'("entity"{_TD}"{name}"{_TD}"{etype}"{_TD}"{desc}")')
        entities.append([_norm_name(name), clean_str(f'"{etype}"'.upper()), _norm_desc(desc)])
    if not entities:  # placeholder so the note is in the graph (local search) at all
        name = _sanitize(f"note {doc.id}")
        first = next((ln.strip("# ").strip() for ln in doc.text.splitlines() if ln.strip()), "")
        desc = _sanitize(first[:200]) or name
        ent_recs.append(f'("entity"{_TD}"{name}"{_TD}"note"{_TD}"{desc}")')
        entities.append([_norm_name(name), clean_str('"NOTE"'), _norm_desc(desc)])
    rel_recs: list[str] = []
    edges: list[list[Any]] = []
    for r in sc.get("relationships") or []:
        if not isinstance(r, dict):
            continue
        src, tgt = _sanitize(r.get("source")), _sanitize(r.get("target"))
        if not src or not tgt:
            continue
        rtype = _sanitize(r.get("type") or DEFAULT_CAUSAL_TYPE)
        desc = _sanitize(r.get("description") or "")
        desc = f"[{rtype}] {desc}".strip() if rtype else desc
        w = _strength(r.get("strength", 5))
        rel_recs.append(f'("relationship"{_TD}"{src}"{_TD}"{tgt}"{_TD}"{desc}"{_TD}{_fmt_num(w)})')
        a, b = sorted((_norm_name(src), _norm_name(tgt)))
        edges.append([a, b, _norm_desc(desc), w])
    return Contribution(
        entity_records=_RD.join(ent_recs),
        relation_records=_RD.join(rel_recs),
        entities=entities,
        edges=edges,
    )


def summarize_descriptions(descs: list[str], max_chars: int = SUMMARY_MAX_CHARS) -> str:
    """Deterministic stand-in for the entity-summary LLM call.

    Args:
        descs: Descriptions in order; surrounding quotes and blanks are stripped.
        max_chars: Cut-off for the result.

    Returns:
        The unique descriptions, in order, joined with ``'; '`` up to the last one that fits
        in ``max_chars`` (the first one cut at ``max_chars`` if even it does not fit).
    """
    seen: list[str] = []
    for d in descs:
        d = str(d).strip().strip('"').strip()
        if d and d not in seen:
            seen.append(d)
    out = ""
    for d in seen:
        nxt = f"{out}; {d}" if out else d
        if len(nxt) > max_chars:
            if not out:
                out = d[:max_chars]
            break
        out = nxt
    return out


def fingerprint(doc: IndexDoc) -> str:
    """A hash of the note's stripped text and its sidecar: equal means nothing to re-index.

    Args:
        doc: The note.

    Returns:
        A sha256 hex digest.
    """
    h = hashlib.sha256()
    h.update(doc.text.strip().encode())
    h.update(b"\0")
    h.update(json.dumps(doc.sidecar or {}, sort_keys=True, default=str).encode())
    return h.hexdigest()
