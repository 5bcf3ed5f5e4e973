"""Entity extraction without a model, for notes that arrive without model-given entities.

It runs whenever a note has none (SPEC-drain §7.2): when the add stage writes a learning
whose ``entities`` are empty (the heuristic writer's, or a model's that gave none), and when
the graph index meets a note without a sidecar or with an empty one, so the graph arm is
never empty on a machine without a model.

Cheap signals only, in this order, about 3–8 entities (at most :data:`MAX_ENTITIES`): the
note's own ``entities``/``tags`` and the ends of its causal relations, `backtick` terms,
known technology names (``kb/vocabulary.py``: tenacity, sqlite3, pnpm, pytest, docker…),
error names (``ValueError: message``, ``ECONNREFUSED``) and other error lines (``fatal:``,
``panic``…), file paths (``api/client.py``, ``pnpm-lock.yaml``, ``Dockerfile``); and, only
while a note still has fewer than three, known engineering concepts ("exponential backoff",
"lockfile") and the noun phrases of its title and rule. The learning's own fields are read before its
body, so the entities name what the rule is about. Relationships are the note's causal
relations, then entities named together in one line of it (``relates_to``), then, so that a
note's entities are never islands, its first entity linked to the next ones — about 2–6 in
all. It is deliberately conservative — a wrong entity pollutes the graph for every later
query, a missing one only costs recall.
"""

from __future__ import annotations

import re
from typing import Any

from .parse import Note
from .render import causal_relations
from .vocabulary import CONCEPTS, DISPLAY, ERRNO, TECHNOLOGIES

MAX_ENTITIES = 8
#: Below this many entities the extractor also takes concepts and title phrases.
MIN_ENTITIES = 3
#: The most relationships the extractor adds beyond the note's own causal relations.
MAX_RELATIONSHIPS = 6
#: A redaction tag (``[REDACTED:<kind>]``) names what was removed, never a concept of the note.
_REDACTED = re.compile(r"\[REDACTED(?::[\w-]*)?\]")
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.-]*")
_ERROR_NAME = re.compile(
    r"(?<![\w])(?:[a-z_][\w]*\.)*(?P<name>[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)|"
    r"(?-i:E[A-Z0-9_]{2,}))\b(?::\s*(?P<msg>[^\n]{1,200}))?"
)
_MESSAGE_END = re.compile(r"[.;\n]\s|\s(?:in|at|when|while|from|after)\s|\s\(|[.;]$")
_ERROR_LINE = re.compile(
    r"(\bfatal:|\bpanic(ked)?\b|\bsegmentation fault\b|\bexit (code|status) [1-9])",
    re.IGNORECASE,
)
_EXTENSIONS = (
    "py pyi pyx js jsx ts tsx mjs cjs rs go java kt rb php c h cc cpp hpp cs swift sh bash zsh "
    "sql toml yaml yml json jsonl ini cfg conf md rst txt lock env xml html css scss vue svelte "
    "gradle tf proto csv"
)
_PATH = re.compile(
    r"(?<![\w/.@:-])(?P<path>(?:\.{0,2}/)?(?:[\w.-]+/)*(?:[\w-][\w.-]*\.(?:"
    + "|".join(_EXTENSIONS.split())
    + r")|Dockerfile|Makefile|Justfile|Gemfile|Procfile|\.env(?:\.\w+)?|\.gitignore))"
    r"(?![\w/-])"
)
_CONCEPT_PATTERNS = sorted(
    (
        (
            c.replace("-", " "),
            re.compile(r"(?<![\w-])" + re.escape(c).replace(r"\-", r"[\s-]") + r"(?![\w-])", re.I),
        )
        for c in CONCEPTS
    ),
    key=lambda item: (-len(item[0].split()), item[0]),
)
# Tags the heuristic writer puts on every note: bookkeeping, not concepts of the note.
# Every signal kind (``cascade/signals.py``) is one; a test keeps the two lists in step.
BOOKKEEPING_TAGS = frozenset(
    {
        "heuristic",
        "speculative",
        "rule",
        "preference",
        "frustration",
        "explicit_rule",
        "prohibition",
        "correction",
        "requirement",
        "root_cause",
        "fix_confirmed",
        "explicit_decision",
        "breakthrough",
        "approval",
        "continuation",
        "time_investment",
        "docs_vs_reality",
        "env_gotcha",
        "interruption",
        "tool_rejection",
    }
)
_PHRASE_STOP = frozenset(
    """
    the a an to and or of with for from in on at by as that which but if when then than into
    onto via per not no never always don't do only avoid prefer use is are was be it this
    these those them one all any every each its our their your new here there instead
    before after without against over under inside outside between across through during
    within about above below around behind beyond near toward towards upon off out up down
    like unlike straight first everywhere too also just really again same other already
    still even
    """.split()  # noqa: SIM905 - a word list
)
_RULE_OPENERS = ("never", "always", "don't", "only", "do", "not", "let")


def _phrases(rule: str) -> list[str]:
    """Noun phrases of a rule: runs of words between stop words in each clause, the
    clause's opening verb, adverbs (``-ly``) and lone gerunds left out."""
    out: list[str] = []
    for clause in re.split(r"[;.]\s+|[;.]$", rule):
        words = [w.strip("`,:()\"'") for w in clause.split()]
        while words and words[0].lower() in _RULE_OPENERS:
            words = words[1:]
        run: list[str] = []
        for word in [*words[1:], "the"]:
            low = word.lower()
            if low in _PHRASE_STOP or low.endswith("ly") or not any(c.isalpha() for c in low):
                while len(run) > 1 and run[0].lower().endswith(("ing", "ed")):
                    run = run[1:]
                if run and not (len(run) == 1 and run[0].lower().endswith(("ing", "ed"))):
                    out.append(" ".join(run[-3:]))
                run = []
            else:
                run.append(word)
    return out


def _error_entity(match: re.Match[str]) -> str:
    """``Name: message`` cut at the message's first clause end, or ``Name``."""
    name, msg = match.group("name"), (match.group("msg") or "").strip()
    if name.startswith("E") and name.isupper() and name not in ERRNO:
        return ""
    end = _MESSAGE_END.search(msg)
    msg = msg[: end.start()] if end else msg
    msg = msg[:60].rsplit(" ", 1)[0] if len(msg) > 60 else msg
    msg = msg.strip(" ,:;.")
    return f"{name}: {msg}" if msg else name


def heuristic_sidecar(note: Note) -> dict[str, Any]:
    """A sidecar-shaped dict (``document_id``, ``entities``, ``relationships``) for ``note``.

    Entities come, in this order, from the frontmatter's ``entities`` (as technologies) and
    ``tags`` (as concepts), the two ends of every causal relation, backtick terms, known
    technology names, error names and error lines, and file paths; while fewer than
    :data:`MIN_ENTITIES`, known concepts and the noun phrases of its title and rule follow. Names are
    de-duplicated case-insensitively and capped at :data:`MAX_ENTITIES`.

    Args:
        note: The parsed note; its frontmatter and body are read, never changed.

    Returns:
        ``{"document_id": note.id, "entities": [{"name", "type", "description"}, ...],
        "relationships": [...]}``: each of the note's causal relations with an empty
        ``description`` and ``strength`` 5, then derived ``relates_to`` edges.
    """
    fm = note.frontmatter
    entities: list[dict[str, str]] = []
    seen: set[str] = set()

    def add(name: str, etype: str) -> None:
        name = " ".join(str(name).split())[:120]
        if name and name.lower() not in seen and len(entities) < MAX_ENTITIES:
            seen.add(name.lower())
            entities.append({"name": name, "type": etype, "description": ""})

    for key, etype in (("entities", "technology"), ("tags", "concept")):
        values = fm.get(key)
        for value in values if isinstance(values, list) else []:
            if isinstance(value, str | int | float) and not (
                key == "tags" and str(value).lower() in BOOKKEEPING_TAGS
            ):
                add(str(value), etype)
    causal = causal_relations(fm.get("causal_relations"))
    relationships = [{**rel, "description": "", "strength": 5} for rel in causal]
    for rel in causal:
        add(rel["source"], "concept")
        add(rel["target"], "concept")
    fields = [str(fm.get(k) or "") for k in ("title", "rule", "key_insight", "root_cause")]
    fields += [str(fm.get(k) or "") for k in ("problem", "fix")]
    fields = [_REDACTED.sub(" ", f) for f in fields]
    text = "\n".join([*fields, _REDACTED.sub(" ", note.body)])
    for term in _BACKTICK.findall(text):
        add(term.strip(), "concept")
    for word in _WORD.findall(text):
        for part in (word.rstrip(".-"), *word.split(".")):
            if part.lower() in TECHNOLOGIES:
                add(DISPLAY.get(part.lower(), part.lower()), "technology")
                break
    for m in _ERROR_NAME.finditer(text):
        add(_error_entity(m), "error")
    for line in text.splitlines():
        line = line.strip().strip("`")
        if _ERROR_LINE.search(line) and not _ERROR_NAME.search(line) and 4 <= len(line) <= 200:
            add(line if len(line) <= 80 else line[:80].rsplit(" ", 1)[0], "error")
    for m in _PATH.finditer(text):
        add(m.group("path"), "file")
    own = "\n".join(fields)
    for source in (own, text):
        for name, pattern in _CONCEPT_PATTERNS:
            if len(entities) >= MIN_ENTITIES:
                break
            if pattern.search(source):
                add(name, "concept")
    if len(entities) < MIN_ENTITIES:
        for phrase in _phrases(f"{fm.get('title') or ''}. {fm.get('rule') or ''}"):
            inside = re.compile(r"(?<![\w-])" + re.escape(phrase.lower()) + r"(?![\w-])")
            if len(entities) < MIN_ENTITIES and not any(inside.search(n) for n in seen):
                add(phrase, "concept")
    relationships += _derived_relationships(entities, text, relationships)
    return {"document_id": note.id, "entities": entities, "relationships": relationships}


def _derived_relationships(
    entities: list[dict[str, str]], text: str, existing: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Co-mention edges, then edges from the first entity, up to ``MAX_RELATIONSHIPS``."""
    have = {frozenset((r["source"].lower(), r["target"].lower())) for r in existing}
    out: list[dict[str, Any]] = []

    def link(a: str, b: str, description: str, strength: int) -> None:
        key = frozenset((a.lower(), b.lower()))
        if a.lower() != b.lower() and key not in have and len(out) < MAX_RELATIONSHIPS:
            have.add(key)
            out.append(
                {
                    "source": a,
                    "target": b,
                    "type": "relates_to",
                    "description": description,
                    "strength": strength,
                }
            )

    names = [e["name"] for e in entities]
    patterns = [(n, re.compile(r"(?<![\w.-])" + re.escape(n) + r"(?![\w-])", re.I)) for n in names]
    for line in text.splitlines():
        present = [n for n, pattern in patterns if pattern.search(line)]
        for i, a in enumerate(present):
            for b in present[i + 1 :]:
                link(a, b, f"mentioned together: {' '.join(line.split())[:160]}", 3)
    # Fewer than two edges: tie the note's first (most prominent) entity to the next ones.
    for other in names[1:]:
        if len(out) + len(existing) >= 2:
            break
        link(names[0], other, "named in the same learning", 2)
    return out


def needs_heuristic_entities(sidecar: dict[str, Any]) -> bool:
    """Whether a sidecar lacks model-given entities, so the heuristic must supply them.

    Args:
        sidecar: A normalised sidecar (``load_sidecar``) or ``sidecar_data`` mapping.

    Returns:
        True when its ``entities`` list is missing or empty.
    """
    return not sidecar.get("entities")
