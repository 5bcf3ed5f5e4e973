"""The heuristic writer and entity extractor before issue 21 item 6, kept as the baseline of
``bench/bench_heuristic_writer.py``. Copied from ``reflect_jobs/writer/heuristic.py`` and
``reflect_jobs/kb/heuristic.py`` as they were at commit 97dbfa1; not used by the package.

The writer stored the matched sentence, lead-ins and all, as the rule and cut the title after
12 words; the extractor found only backtick terms, a short technology list and error lines.
"""

from __future__ import annotations

import re
from typing import Any

from reflect_jobs.kb.parse import Note
from reflect_jobs.kb.render import causal_relations
from reflect_jobs.markers import CHILD_MARKER

# --- the writer (reflect_jobs/writer/heuristic.py) --------------------------------------

CONFIDENCE = 0.35
MAX_HEURISTIC_CREATES = 5
MAX_TITLE_WORDS = 12
MAX_RULE_CHARS = 300

# The slice ends with machine-written blocks full of "always"/"never" prose of our own.
_TRAILING_BLOCKS = (
    "## Related existing learnings (belief revision)",
    "## Consolidated observations",
    "## Reflection items (candidates)",
)
_APOS = "['\u2019]"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("frustration", re.compile(r"\bi already told you\b", re.I)),
    ("root_cause", re.compile(r"\bthe (?:root cause|real cause|actual cause) (?:was|is)\b", re.I)),
    (
        "preference",
        re.compile(
            r"\buse\s+[\w.+/-]+(?:\s+[\w.+/-]+)?\s+(?:not|instead of|rather than)\s+\w", re.I
        ),
    ),
    ("correction", re.compile(r"^no\b\s*[,.!:;\u2014-]", re.I)),
    (
        "rule",
        re.compile(
            rf"^(?:please\s+)?(?:always|never|don{_APOS}?t|do not)\b"
            r"|\byou (?:should|must) (?:always|never|not)\b",
            re.I,
        ),
    ),
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(r"^(?:no\b\s*[,.!:;\u2014-]\s*|please\s+)+", re.I)
_CATEGORY_WORDS = (
    ("Security", re.compile(r"password|secret|credential|token|vulnerab|inject|sanitiz", re.I)),
    ("Tools", re.compile(r"\b(?:cli|npm|pnpm|yarn|pip|git|docker|shell|terminal|config)\b", re.I)),
    ("Process", re.compile(r"\b(?:commit|branch|merge|review|deploy|release|workflow)\b", re.I)),
)


def _dialogue_lines(slice_text: str) -> list[str]:
    cut = len(slice_text)
    for marker in _TRAILING_BLOCKS:
        pos = slice_text.find(marker)
        if pos >= 0:
            cut = min(cut, pos)
    out = []
    for raw in slice_text[:cut].splitlines():
        line = " ".join(raw.split())
        if not line or line.startswith("# ") or line.startswith("\u2026"):
            continue
        if CHILD_MARKER in line:
            continue
        out.append(line)
    return out


def _match(sentence: str) -> str:
    for kind, pattern in _PATTERNS:
        if pattern.search(sentence):
            return kind
    return ""


def _title(sentence: str) -> str:
    words = _LEAD.sub("", sentence).split()[:MAX_TITLE_WORDS]
    title = " ".join(words).rstrip(".,;:!?")
    return title[:1].upper() + title[1:]


def _category(text: str, kind: str) -> str:
    for name, pattern in _CATEGORY_WORDS:
        if pattern.search(text):
            return name
    return "New Skill" if kind == "root_cause" else "Unknown"


def _learning(sentence: str, line: str, kind: str) -> dict:
    rule = _LEAD.sub("", sentence)[:MAX_RULE_CHARS]
    rule = rule[:1].upper() + rule[1:]
    context = line[: MAX_RULE_CHARS * 2]
    return {
        "title": _title(sentence),
        "category": _category(line, kind),
        "key_insight": rule,
        "problem": "",
        "root_cause": rule if kind == "root_cause" else "",
        "fix": "",
        "rule": rule,
        "confidence_num": CONFIDENCE,
        "tags": ["heuristic", kind],
        "entities": [],
        "causal_relations": [],
        "scope": "repo",
        "body": f"## Context\n{context}\n\n(Extracted by the heuristic backend: no model was used.)",
    }


def heuristic_actions_baseline(slice_text: str) -> list[dict]:
    """CREATE actions for the first explicit corrections in a slice (at most five).

    The slice carries no roles, so a correction-shaped sentence an agent wrote matches too.

    Args:
        slice_text: The slice as ``prepare`` built it; its ``# `` header lines, ``…`` gap
            lines and trailing revision block are skipped.

    Returns:
        Up to ``MAX_HEURISTIC_CREATES`` CREATE actions in slice order, one per distinct
        title, each learning with confidence 0.35 and tags ``["heuristic", <kind>]``.
    """
    actions: list[dict] = []
    seen: set[str] = set()
    for line in _dialogue_lines(slice_text):
        for sentence in _SENTENCE_SPLIT.split(line):
            kind = _match(sentence)
            if not kind:
                continue
            learning = _learning(sentence, line, kind)
            key = learning["title"].lower()
            if not key or key in seen:
                continue
            seen.add(key)
            actions.append(
                {
                    "action": "CREATE",
                    "reason": f"explicit {kind.replace('_', ' ')} in the session",
                    "learning": learning,
                }
            )
            if len(actions) >= MAX_HEURISTIC_CREATES:
                return actions
    return actions


# --- the extractor (reflect_jobs/kb/heuristic.py) --------------------------------------

# Names that are also common English words ("go", "make", "react", "black") are left out.
TECHNOLOGIES = frozenset(
    """
    python rust golang java kotlin typescript javascript nodejs deno ruby php perl
    bash zsh powershell c++ csharp scala elixir erlang haskell lua
    npm pnpm yarn pip pipx uv poetry conda cargo gradle maven cmake bazel homebrew
    docker podman kubernetes kubectl helm terraform ansible systemd launchd nginx caddy
    postgres postgresql mysql sqlite redis mongodb elasticsearch kafka rabbitmq
    git github gitlab pytest unittest hypothesis jest vitest mypy ruff eslint prettier
    reactjs vue svelte nextjs django flask fastapi sqlalchemy alembic pydantic celery huey
    numpy pandas pytorch torch tensorflow networkx yaml json toml graphql grpc http ssh
    linux macos windows wsl aws gcp azure vscode vim neovim tmux claude codex copilot
    openai anthropic
    """.split()  # noqa: SIM905 - a word list reads better than 90 quoted strings
)
_DISPLAY = {"c++": "C++"}
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.]*")
_ERROR_LINE = re.compile(
    r"(Traceback \(most recent call last\)|\b\w*(Error|Exception)\b:|(?-i:\bE[A-Z]{3,}\b)|"
    r"\bfatal:|\bpanic(ked)?\b|\bsegmentation fault\b|\bexit (code|status) [1-9])",
    re.IGNORECASE,
)
MAX_ENTITIES = 12
#: The most relationships the extractor adds beyond the note's own causal relations.
MAX_RELATIONSHIPS = 6
# Tags the heuristic writer puts on every note: bookkeeping, not concepts of the note.
_BOOKKEEPING_TAGS = frozenset(
    {"heuristic", "speculative", "frustration", "root_cause", "preference", "correction", "rule"}
)


def heuristic_sidecar_baseline(note: Note) -> dict[str, Any]:
    """A sidecar-shaped dict (``document_id``, ``entities``, ``relationships``) for ``note``.

    Entities come, in this order, from the frontmatter's ``entities`` (as technologies) and
    ``tags`` (as concepts), backtick terms, known technology names, error-looking lines, and
    the two ends of every causal relation; names are de-duplicated case-insensitively and
    capped at :data:`MAX_ENTITIES`.

    Args:
        note: The parsed note; its frontmatter and body are read, never changed.

    Returns:
        ``{"document_id": note.id, "entities": [{"name", "type", "description"}, ...],
        "relationships": [...]}``, where each relationship is one of the note's causal
        relations with an empty ``description`` and ``strength`` 5.
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
                key == "tags" and str(value).lower() in _BOOKKEEPING_TAGS
            ):
                add(str(value), etype)
    text = "\n".join(
        [str(fm.get(k) or "") for k in ("title", "key_insight", "problem", "fix", "rule")]
        + [note.body]
    )
    for term in _BACKTICK.findall(text):
        add(term.strip(), "concept")
    for word in _WORD.findall(text):
        word = word.rstrip(".")  # sentence-final period
        if word.lower() in TECHNOLOGIES:
            add(_DISPLAY.get(word.lower(), word.lower()), "technology")
    for line in text.splitlines():
        line = line.strip().strip("`")
        if _ERROR_LINE.search(line) and 4 <= len(line) <= 200:
            add(line, "error")
    relationships = [
        {**rel, "description": "", "strength": 5}
        for rel in causal_relations(fm.get("causal_relations"))
    ]
    for rel in relationships:
        add(rel["source"], "concept")
        add(rel["target"], "concept")
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
