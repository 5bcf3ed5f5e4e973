"""What a learning applies to, and whether that fits a repository's stack (stdlib only).

A global learning is worth telling in a repository only when it is about something the
repository uses: a rule about Java's ``equals`` in a Rust repository is noise that costs the
session a line and the reader's trust (issue 25). So every learning carries the languages,
frameworks and tools it applies to — the writer's ``applies_to`` when it gave one, else what
its tags, entities and wording name (:func:`applies_of`) — and every repository a profile of
the same terms (:mod:`reflect_jobs.recall.profile`). :func:`fit` compares the two.

The vocabulary is small on purpose: a term is canonical (``csharp``, ``github-actions``),
has a kind (language, framework, tool) and the spellings that mean it. A term the
vocabulary does not know (``pydantic``) is kept as written, lower-cased, and treated as a
tool: it fits a repository whose manifests name it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

LANGUAGE = "language"
FRAMEWORK = "framework"
TOOL = "tool"

#: canonical term -> (kind, spellings in tags/entities/applies_to, spellings safe in prose).
#: A prose spelling is matched as a whole word, case-insensitively; ambiguous words (``go``,
#: ``c``, ``spring``, ``node``, ``react``) are only read from tags, entities and applies_to.
VOCABULARY: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "python": (LANGUAGE, ("python", "py", "python3", "cpython"), ("python", "cpython")),
    "javascript": (LANGUAGE, ("javascript", "js", "ecmascript", "esm", "cjs"), ("javascript",)),
    "typescript": (LANGUAGE, ("typescript", "ts", "tsx", "tsc"), ("typescript", "tsconfig")),
    "rust": (
        LANGUAGE,
        ("rust", "rustc", "cargo", "clippy", "rustfmt"),
        ("rust", "cargo", "clippy"),
    ),
    "go": (
        LANGUAGE,
        ("go", "golang", "goroutine", "goroutines"),
        ("golang", "goroutine", "goroutines"),
    ),
    "java": (LANGUAGE, ("java", "jvm", "maven", "gradle"), ("java", "jvm", "maven")),
    "kotlin": (LANGUAGE, ("kotlin", "kt"), ("kotlin",)),
    "csharp": (
        LANGUAGE,
        ("csharp", "c#", "cs", ".net", "dotnet", "nuget"),
        ("c#", "dotnet", "nuget"),
    ),
    "ruby": (LANGUAGE, ("ruby", "rb", "gem", "bundler", "rubygems"), ("ruby", "rubygems")),
    "php": (LANGUAGE, ("php", "composer"), ("php",)),
    "cpp": (LANGUAGE, ("cpp", "c++", "cxx", "cmake"), ("c++",)),
    "c": (LANGUAGE, ("c", "clang", "gcc"), ()),
    "swift": (LANGUAGE, ("swift", "swiftui", "xcode"), ("swiftui",)),
    "scala": (LANGUAGE, ("scala", "sbt"), ("scala",)),
    "elixir": (LANGUAGE, ("elixir", "mix", "phoenix"), ("elixir",)),
    "shell": (LANGUAGE, ("shell", "bash", "sh", "zsh", "shellcheck"), ("bash", "shellcheck")),
    "pytest": (FRAMEWORK, ("pytest", "pytest-asyncio", "conftest"), ("pytest", "conftest")),
    "django": (FRAMEWORK, ("django",), ("django",)),
    "fastapi": (FRAMEWORK, ("fastapi",), ("fastapi",)),
    "flask": (FRAMEWORK, ("flask",), ("flask",)),
    "sqlalchemy": (FRAMEWORK, ("sqlalchemy",), ("sqlalchemy",)),
    "pandas": (FRAMEWORK, ("pandas",), ("pandas",)),
    "numpy": (FRAMEWORK, ("numpy",), ("numpy",)),
    "react": (
        FRAMEWORK,
        ("react", "reactjs", "jsx", "react-dom"),
        ("usestate", "useeffect", "jsx"),
    ),
    "nextjs": (FRAMEWORK, ("nextjs", "next.js", "next"), ("next.js", "nextjs")),
    "vue": (FRAMEWORK, ("vue", "vuejs", "nuxt"), ("vue.js", "vuejs")),
    "angular": (FRAMEWORK, ("angular",), ("angular",)),
    "spring": (FRAMEWORK, ("spring", "spring-boot", "springboot"), ("spring boot",)),
    "android": (FRAMEWORK, ("android",), ("android",)),
    "ios": (FRAMEWORK, ("ios", "uikit"), ("uikit",)),
    "rails": (FRAMEWORK, ("rails", "activerecord", "rubyonrails"), ("activerecord", "rails")),
    "laravel": (FRAMEWORK, ("laravel", "eloquent"), ("laravel",)),
    "tokio": (FRAMEWORK, ("tokio",), ("tokio",)),
    "asyncio": (TOOL, ("asyncio", "aiohttp", "anyio", "trio", "uvloop"), ("asyncio",)),
    "node": (TOOL, ("node", "nodejs", "node.js", "npm", "pnpm", "yarn"), ("node.js", "nodejs")),
    "git": (TOOL, ("git",), ("git",)),
    "docker": (TOOL, ("docker", "dockerfile", "docker-compose"), ("docker", "dockerfile")),
    "github-actions": (TOOL, ("github-actions", "gha", "actions", "ci"), ("github actions",)),
    "postgres": (
        TOOL,
        ("postgres", "postgresql", "psycopg", "psycopg2", "pg"),
        ("postgres", "postgresql"),
    ),
    "sqlite": (TOOL, ("sqlite", "sqlite3"), ("sqlite",)),
    "redis": (TOOL, ("redis",), ("redis",)),
    "kubernetes": (TOOL, ("kubernetes", "k8s", "kubectl", "helm"), ("kubernetes", "kubectl")),
    "terraform": (TOOL, ("terraform", "hcl"), ("terraform",)),
    "linux": (TOOL, ("linux", "systemd"), ("systemd",)),
    "cmake": (TOOL, ("cmake",), ("cmake",)),
    "css": (TOOL, ("css", "scss", "tailwind"), ()),
}
KIND = {term: spec[0] for term, spec in VOCABULARY.items()}
_ALIAS = {alias: term for term, spec in VOCABULARY.items() for alias in (term, *spec[1])}
_PROSE = {alias: term for term, spec in VOCABULARY.items() for alias in spec[2]}
_prose_re: re.Pattern[str] | None = None


def _prose() -> re.Pattern[str]:
    """The prose spellings as one pattern, compiled on first use (the hook never needs it:
    inference runs when the worker refreshes the context store)."""
    global _prose_re
    if _prose_re is None:
        _prose_re = re.compile(
            r"(?<![\w.#+-])("
            + "|".join(sorted((re.escape(a) for a in _PROSE), key=len, reverse=True))
            + r")(?![\w#+])",
            re.IGNORECASE,
        )
    return _prose_re


#: What a fitting learning's matched terms weigh: a framework says most about the task.
WEIGHT = {LANGUAGE: 1.0, FRAMEWORK: 3.0, TOOL: 2.0}
#: The fit of a learning that names no stack at all (a rule for any repository).
UNIVERSAL_FIT = 0.25
MAX_TERMS = 12
_TERM_OK = re.compile(r"^[a-z0-9][a-z0-9.+#_-]{0,39}$")


def canonical(term: object) -> str:
    """One term in its canonical spelling (``C#`` → ``csharp``), or ``""`` when unusable.

    Args:
        term: A tag, entity or applies_to value.

    Returns:
        The vocabulary's term, else the value lower-cased and trimmed when it looks like a
        name (letters, digits, ``.+#_-``; at most 40 characters), else ``""``.
    """
    t = str(term or "").strip().lower()
    if t in _ALIAS:
        return _ALIAS[t]
    t = t.replace(" ", "-")
    return t if _TERM_OK.match(t) else ""


def normalise(terms: object) -> list[str]:
    """Distinct canonical terms of an ``applies_to`` value (a list, or a comma/space string).

    Args:
        terms: What a note or the writer said.

    Returns:
        At most :data:`MAX_TERMS` terms, in order.
    """
    if isinstance(terms, str):
        items: Iterable[object] = re.split(r"[,\s]+", terms)
    elif isinstance(terms, (list, tuple)):
        items = terms
    else:
        return []
    out: dict[str, None] = {}
    for item in items:
        t = canonical(item)
        if t:
            out[t] = None
    return list(out)[:MAX_TERMS]


def applies_of(
    explicit: object, tags: object = (), entities: object = (), text: str = ""
) -> list[str]:
    """What a learning applies to: its own ``applies_to``, else what it names.

    Without an explicit value (a note from before the field, or a writer that left it
    empty) only *known* terms are inferred — from tags and entities by any spelling, from
    the title/rule/insight by the prose spellings — so a tag such as ``performance`` never
    makes a learning "about" something no repository can have.

    Args:
        explicit: The note's ``applies_to`` (list or string; empty or missing: infer).
        tags: The note's tags.
        entities: The note's entities.
        text: Its title, rule and key insight.

    Returns:
        Canonical terms; empty means "any repository".
    """
    given = normalise(explicit)
    if given:
        return given
    out: dict[str, None] = {}
    for group in (tags, entities):
        for item in group if isinstance(group, (list, tuple)) else []:
            t = str(item or "").strip().lower()
            if t in _ALIAS:
                out[_ALIAS[t]] = None
    for m in _prose().finditer(text[:4000]):
        out[_PROSE[m.group(1).lower()]] = None
    return list(out)[:MAX_TERMS]


def fit(applies: Iterable[str], profile: Iterable[str]) -> float | None:
    """How well a learning fits a repository, or ``None`` when it is about another stack.

    The rule: a learning that names languages fits only when the repository has one of
    them (a TypeScript repository has JavaScript too); one that names frameworks, only when
    the repository has one of those; one that names only tools, only when it has one of
    those. A learning that names nothing fits any repository, weakly.

    Args:
        applies: The learning's terms (:func:`applies_of`).
        profile: The repository's terms (:func:`reflect_jobs.recall.profile.profile_terms`).

    Returns:
        ``None`` for a misfit; else the summed weight of the matched terms
        (:data:`WEIGHT`), or :data:`UNIVERSAL_FIT` for a learning that names nothing.
    """
    have = set(profile)
    if "typescript" in have:
        have.add("javascript")
    terms = [t for t in applies if t]
    if not terms:
        return UNIVERSAL_FIT
    by_kind: dict[str, list[str]] = {}
    for t in terms:
        by_kind.setdefault(KIND.get(t, TOOL), []).append(t)
    for kind in (LANGUAGE, FRAMEWORK):
        named = by_kind.get(kind)
        if named and not set(named) & have:
            return None
    if set(by_kind) == {TOOL} and not set(by_kind[TOOL]) & have:
        return None
    return sum(WEIGHT[KIND.get(t, TOOL)] for t in terms if t in have) or UNIVERSAL_FIT


def dumps(terms: Iterable[str]) -> str:
    """Terms as the context store keeps them: one space-separated string.

    Args:
        terms: Stack terms (empty ones are left out).

    Returns:
        The string.
    """
    return " ".join(t for t in terms if t)


def loads(text: object) -> list[str]:
    """The stored string back as terms.

    Args:
        text: The stored value (``None`` or a non-string reads as none).

    Returns:
        The terms.
    """
    return [t for t in str(text or "").split() if t]
