"""What a repository's manifests and lockfiles declare, read cheaply (stdlib only).

The half of the repository profile (:mod:`.profile`) that reads files by name: the manifests
at the root (:data:`MANIFESTS`, each read at most :data:`MANIFEST_BYTES`) give dependency
names through small format-aware readers (TOML without a TOML parser, ``requirements*.txt``,
``package.json``/``composer.json``, ``go.mod``, ``Gemfile``, ``setup.py``/Maven/Gradle
quoted names); lockfiles (:data:`LOCKFILES`) are read only for their first
:data:`LOCK_BYTES` and searched for the vocabulary's package names (:data:`PACKAGES`), so a
2 GB ``package-lock.json`` costs the same as a small one. Nothing is run and no link is
followed (``fsio.open_regular`` with ``follow=False``).
"""

from __future__ import annotations

import json
import re

MANIFEST_BYTES = 256 * 1024
LOCK_BYTES = 512 * 1024

MANIFESTS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements_test.txt",
    "requirements-test.txt",
    "Pipfile",
    "package.json",
    "tsconfig.json",
    "Cargo.toml",
    "go.mod",
    "Gemfile",
    "composer.json",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "global.json",
    "Package.swift",
    "CMakeLists.txt",
    "Dockerfile",
    "docker-compose.yml",
    "compose.yaml",
    "manage.py",
)
LOCKFILES = (
    "Cargo.lock",
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lock",
    "poetry.lock",
    "uv.lock",
    "Pipfile.lock",
    "Gemfile.lock",
    "go.sum",
    "composer.lock",
)
#: Manifest -> the terms its presence alone says.
MARKS: dict[str, tuple[str, ...]] = {
    "pyproject.toml": ("python",),
    "setup.py": ("python",),
    "setup.cfg": ("python",),
    "requirements.txt": ("python",),
    "Pipfile": ("python",),
    "manage.py": ("python", "django"),
    "package.json": ("javascript", "node"),
    "tsconfig.json": ("typescript",),
    "Cargo.toml": ("rust",),
    "go.mod": ("go",),
    "Gemfile": ("ruby",),
    "composer.json": ("php",),
    "pom.xml": ("java",),
    "build.gradle": ("java",),
    "build.gradle.kts": ("kotlin",),
    "global.json": ("csharp",),
    "Package.swift": ("swift",),
    "CMakeLists.txt": ("cpp", "cmake"),
    "Dockerfile": ("docker",),
    "docker-compose.yml": ("docker",),
    "compose.yaml": ("docker",),
}
#: A declared dependency (or the project's own name) -> the terms it says.
PACKAGES: dict[str, tuple[str, ...]] = {
    "django": ("django",),
    "djangorestframework": ("django",),
    "fastapi": ("fastapi",),
    "flask": ("flask",),
    "sqlalchemy": ("sqlalchemy",),
    "pandas": ("pandas",),
    "numpy": ("numpy",),
    "pytest": ("pytest",),
    "pytest-asyncio": ("pytest", "asyncio"),
    "aiohttp": ("asyncio",),
    "anyio": ("asyncio",),
    "trio": ("asyncio",),
    "uvloop": ("asyncio",),
    "asgiref": ("asyncio",),
    "psycopg": ("postgres",),
    "psycopg2": ("postgres",),
    "psycopg2-binary": ("postgres",),
    "asyncpg": ("postgres",),
    "pg": ("postgres",),
    "redis": ("redis",),
    "react": ("react",),
    "react-dom": ("react",),
    "next": ("nextjs", "react"),
    "vue": ("vue",),
    "nuxt": ("vue",),
    "@angular/core": ("angular",),
    "typescript": ("typescript",),
    "tokio": ("tokio",),
    "rails": ("rails",),
    "activerecord": ("rails",),
    "laravel/framework": ("laravel",),
    "spring-boot-starter": ("spring",),
    "spring-boot": ("spring",),
}
_lock_re: re.Pattern[str] | None = None


def lock_names() -> re.Pattern[str]:
    """The known package names as whole names in a lockfile's head (compiled on a cache miss
    only: a warm session start never needs it).

    Returns:
        A pattern whose ``findall`` gives every :data:`PACKAGES` name in a text.
    """
    global _lock_re
    if _lock_re is None:
        _lock_re = re.compile(
            r"(?<![\w@.-])("
            + "|".join(sorted((re.escape(p) for p in PACKAGES), key=len, reverse=True))
            + r")(?![\w/-])",
            re.IGNORECASE,
        )
    return _lock_re


#: What a dependency name may look like (anything else read from a manifest is dropped).
NAME = re.compile(r"^[A-Za-z0-9@][A-Za-z0-9._/@-]{0,100}$")
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_QUOTED = re.compile(r"[\"']([A-Za-z0-9@][A-Za-z0-9._/@-]{0,100})")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*=", re.MULTILINE)
_TOML_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$", re.MULTILINE)
_GEM = re.compile(r"""^\s*gem\s+["']([A-Za-z0-9_.-]+)""", re.MULTILINE)
_GO_REQ = re.compile(r"^\s*(?:require\s+)?([a-z0-9.-]+\.[a-z]+/[^\s]+)\s+v", re.MULTILINE)


def head(path: str, limit: int) -> str | None:
    """The first ``limit`` bytes of a regular file (no link followed), or ``None``.

    Args:
        path: The file.
        limit: At most this many bytes are read.

    Returns:
        The bytes read, decoded (invalid UTF-8 replaced); ``None`` when the path is not a
        regular file or cannot be read.
    """
    from reflect_jobs.fsio import open_regular

    try:
        with open_regular(path, follow=False) as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _toml_names(text: str) -> set[str]:
    """Dependency names of a TOML manifest, without a TOML parser (bounded text, regexes).

    The keys of every section whose name mentions ``dependencies``, the quoted names in
    ``dependencies = [...]``/``requires``/``members`` arrays, and ``name = "..."``.
    """
    names: set[str] = set()
    sections = [(m.start(), m.group(1).strip()) for m in _TOML_SECTION.finditer(text)]
    bounds = [*(s for s, _ in sections), len(text)]
    for i, (start, title) in enumerate(sections):
        body = text[start : bounds[i + 1]]
        head, _, tail = title.partition(".")
        if head.endswith("dependencies") and tail:  # [dependencies.serde]: its keys are
            names.add(tail.strip("'\""))  # the dependency's settings, not names
            continue
        if "dependencies" in title:
            names.update(k for k in _TOML_KEY.findall(body))
            # Quoted names in arrays (``test = ["pytest>=8"]``); a quoted value after a key
            # is a version (``tokio = "1"``), never a name: names start with a letter.
            names.update(
                n
                for q in _QUOTED.findall(body)
                if (n := re.split(r"[<>=!~\[; ]", q, maxsplit=1)[0])[:1].isalpha()
            )
    for m in re.finditer(
        r"^\s*(dependencies|requires|members|dev-dependencies)\s*=\s*\[([^\]]*)\]",
        text,
        re.MULTILINE,
    ):
        for q in _QUOTED.findall(m.group(2)):
            names.add(re.split(r"[<>=!~\[; ]", q, maxsplit=1)[0].rsplit("/", 1)[-1])
    for m in re.finditer(r"^\s*name\s*=\s*[\"']([^\"']+)", text, re.MULTILINE):
        names.add(m.group(1))
    return {n for n in names if n[:1].isalpha()}


def manifest_names(name: str, text: str) -> set[str]:
    """The dependency (and project) names one manifest declares.

    Args:
        name: The manifest's file name (one of :data:`MANIFESTS`).
        text: Its head (:func:`head`, at most :data:`MANIFEST_BYTES`).

    Returns:
        The names as written (not yet checked against :data:`NAME`); empty for a manifest
        whose format declares none.
    """
    if name.endswith(".toml") or name in ("Pipfile",):
        return _toml_names(text)
    if name.startswith("requirements"):
        return {m.group(1) for line in text.splitlines() if (m := _REQ.match(line))}
    if name in ("package.json", "composer.json"):
        try:
            data = json.loads(text)
        except ValueError:
            return set(_QUOTED.findall(text))
        if not isinstance(data, dict):
            return set()
        out = {str(data.get("name") or "")}
        for key in (
            "dependencies",
            "devDependencies",
            "peerDependencies",
            "require",
            "require-dev",
        ):
            deps = data.get(key)
            if isinstance(deps, dict):
                out.update(str(k) for k in deps)
        return out
    if name == "go.mod":
        return {p.rsplit("/", 1)[-1] for p in _GO_REQ.findall(text)}
    if name == "Gemfile":
        return set(_GEM.findall(text))
    if name in ("setup.py", "setup.cfg", "pom.xml", "build.gradle", "build.gradle.kts"):
        return {q.rsplit(":", 1)[-1] for q in _QUOTED.findall(text)} | set(
            re.findall(r"<artifactId>([^<]+)</artifactId>", text)
        )
    return set()
