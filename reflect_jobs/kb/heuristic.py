"""Entity extraction without a model, for notes that arrive without model-given entities.

It runs whenever a note has none (SPEC-drain §7.2): when the add stage writes a learning
whose ``entities`` are empty (the heuristic writer's, or a model's that gave none), and when
the graph index meets a note without a sidecar or with an empty one, so the graph arm is
never empty on a machine without a model.

Cheap signals only: the note's own ``entities``/``tags``, `backtick` terms, a fixed list of
technology names, and error-looking lines, as about 3–8 entities; relationships are the
note's causal relations, then entities named together in one line of it (``relates_to``),
then, so that a note's entities are never islands, its first entity linked to the next ones
— about 2–6 in all. It is deliberately conservative — a wrong entity pollutes the graph for
every later query, a missing one only costs recall.
"""

from __future__ import annotations

import re
from typing import Any

from .parse import Note
from .render import causal_relations

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


def heuristic_sidecar(note: Note) -> dict[str, Any]:
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


def needs_heuristic_entities(sidecar: dict[str, Any]) -> bool:
    """Whether a sidecar lacks model-given entities, so the heuristic must supply them.

    Args:
        sidecar: A normalised sidecar (``load_sidecar``) or ``sidecar_data`` mapping.

    Returns:
        True when its ``entities`` list is missing or empty.
    """
    return not sidecar.get("entities")
