"""A repository's stack, read cheaply from its manifests and files, cached (stdlib only).

The session-start block tells only the global learnings that fit the repository
(:func:`reflect_jobs.recall.stack.fit`), so the SessionStart hook needs to know what the
repository is made of — at no cost in money and little in time. The profile is a set of
canonical terms (``python``, ``pytest``, ``tokio``, ``docker``…) plus the names of the
dependencies its manifests declare, from:

* manifests at the root (``pyproject.toml``, ``requirements*.txt``, ``setup.py``,
  ``package.json``, ``Cargo.toml``, ``go.mod``, ``Gemfile``, ``*.gemspec``, ``composer.json``,
  ``pom.xml``, ``build.gradle(.kts)``, ``global.json``, ``*.csproj``, ``Package.swift``,
  ``CMakeLists.txt``…), each read at most :data:`MANIFEST_BYTES`;
* lockfiles, of which only the first :data:`LOCK_BYTES` are read (a 2 GB ``package-lock.json``
  costs the same as a small one), searched for the vocabulary's package names only;
* the most common file extensions among at most :data:`WALK_ENTRIES` directory entries
  (three levels, vendored and generated trees skipped);
* marker files (``Dockerfile``, ``.github/workflows``, ``.git``).

Nothing is run and no link is followed (``fsio.open_regular`` with ``follow=False``: a FIFO or
a link named ``package.json`` is skipped). The result is cached under
``$REFLECT_HOME/recall/profiles/<sha256 of root>.json`` (0600 in 0700) with the size and
mtime of every manifest it read and the root's own mtime; a change to any of them, or a
day passing, reads the repository again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time

from . import stack

MANIFEST_BYTES = 256 * 1024
LOCK_BYTES = 512 * 1024
WALK_ENTRIES = 4000
WALK_DEPTH = 3
TOP_EXTENSIONS = 6
#: An extension counts when it is at least this share of the files seen.
EXTENSION_SHARE = 0.04
CACHE_TTL_SEC = 86400.0
#: Bumped when what a profile holds changes (2: versions and section names are not names).
CACHE_VERSION = 2
MAX_DEPENDENCIES = 400

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
EXTENSIONS: dict[str, tuple[str, ...]] = {
    ".py": ("python",),
    ".pyi": ("python",),
    ".js": ("javascript",),
    ".mjs": ("javascript",),
    ".cjs": ("javascript",),
    ".jsx": ("javascript", "react"),
    ".ts": ("typescript",),
    ".mts": ("typescript",),
    ".tsx": ("typescript", "react"),
    ".rs": ("rust",),
    ".go": ("go",),
    ".java": ("java",),
    ".kt": ("kotlin",),
    ".kts": ("kotlin",),
    ".cs": ("csharp",),
    ".csproj": ("csharp",),
    ".rb": ("ruby",),
    ".erb": ("ruby",),
    ".php": ("php",),
    ".cpp": ("cpp",),
    ".cc": ("cpp",),
    ".cxx": ("cpp",),
    ".hpp": ("cpp",),
    ".cu": ("cpp",),
    ".c": ("c",),
    ".swift": ("swift",),
    ".scala": ("scala",),
    ".ex": ("elixir",),
    ".exs": ("elixir",),
    ".sh": ("shell",),
    ".bash": ("shell",),
    ".vue": ("javascript", "vue"),
    ".css": ("css",),
    ".scss": ("css",),
    ".tf": ("terraform",),
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


def _lock_names() -> re.Pattern[str]:
    """The known package names as whole names in a lockfile's head (compiled on a cache miss
    only: a warm session start never needs it)."""
    global _lock_re
    if _lock_re is None:
        _lock_re = re.compile(
            r"(?<![\w@.-])("
            + "|".join(sorted((re.escape(p) for p in PACKAGES), key=len, reverse=True))
            + r")(?![\w/-])",
            re.IGNORECASE,
        )
    return _lock_re


_SKIP_DIRS = frozenset(
    {
        ".git",
        "node_modules",
        "target",
        "dist",
        "build",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        "vendor",
        ".next",
        ".mypy_cache",
        ".pytest_cache",
    }
)
_NAME = re.compile(r"^[A-Za-z0-9@][A-Za-z0-9._/@-]{0,100}$")
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_QUOTED = re.compile(r"[\"']([A-Za-z0-9@][A-Za-z0-9._/@-]{0,100})")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*=", re.MULTILINE)
_TOML_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$", re.MULTILINE)
_GEM = re.compile(r"""^\s*gem\s+["']([A-Za-z0-9_.-]+)""", re.MULTILINE)
_GO_REQ = re.compile(r"^\s*(?:require\s+)?([a-z0-9.-]+\.[a-z]+/[^\s]+)\s+v", re.MULTILINE)


def _head(path: str, limit: int) -> str | None:
    """The first ``limit`` bytes of a regular file (no link followed), or ``None``."""
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


def _manifest_names(name: str, text: str) -> set[str]:
    """The dependency (and project) names one manifest declares."""
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


def _walk(root: str) -> tuple[dict[str, int], set[str]]:
    """Extension counts and marker names among at most :data:`WALK_ENTRIES` entries."""
    counts: dict[str, int] = {}
    marks: set[str] = set()
    seen = 0
    queue = [(root, 0)]
    while queue and seen < WALK_ENTRIES:
        path, depth = queue.pop(0)
        try:
            with os.scandir(path) as it:
                for entry in it:
                    seen += 1
                    if seen > WALK_ENTRIES:
                        break
                    name = entry.name
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir:
                        workflows = os.path.join(entry.path, "workflows")
                        if depth == 0 and name == ".github" and os.path.isdir(workflows):
                            marks.add("github-actions")
                        if depth == 0 and name == ".git":
                            marks.add("git")
                        if depth < WALK_DEPTH - 1 and name not in _SKIP_DIRS and name[:1] != ".":
                            queue.append((entry.path, depth + 1))
                        continue
                    if depth == 0 and name == ".git":
                        marks.add("git")  # a linked worktree's .git file
                    if name.endswith(".gemspec") or name.endswith(".csproj"):
                        marks.add(name)
                    ext = os.path.splitext(name)[1].lower()
                    if ext:
                        counts[ext] = counts.get(ext, 0) + 1
        except OSError:
            continue
    return counts, marks


def read_profile(root: str) -> dict:
    """Read a repository's profile now (no cache).

    Args:
        root: The repository's root directory.

    Returns:
        ``{"terms": [...], "dependencies": [...], "extensions": {ext: count}, "stamp": {...}}``
        where ``stamp`` holds the size and mtime of each manifest and lockfile read.
    """
    terms: dict[str, None] = {}
    deps: set[str] = set()
    stamp: dict[str, list[float]] = {}
    for name in MANIFESTS + LOCKFILES:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        stamp[name] = [st.st_size, st.st_mtime]
        for t in MARKS.get(name, ()):
            terms[t] = None
        if name in LOCKFILES:
            text = _head(path, LOCK_BYTES)
            if text:
                deps.update(n.lower() for n in _lock_names().findall(text))
            continue
        text = _head(path, MANIFEST_BYTES)
        if text:
            deps.update(n for n in _manifest_names(name, text) if n and _NAME.match(n))
    counts, marks = _walk(root)
    for mark in marks:
        if mark.endswith(".gemspec"):
            deps.add(mark[: -len(".gemspec")])
            terms["ruby"] = None
        elif mark.endswith(".csproj"):
            terms["csharp"] = None
        else:
            terms[mark] = None
    total = sum(counts.values()) or 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_EXTENSIONS]
    for ext, n in top:
        if n / total >= EXTENSION_SHARE or n >= 20:
            for t in EXTENSIONS.get(ext, ()):
                terms[t] = None
    for dep in sorted(deps):
        low = dep.lower()
        for t in PACKAGES.get(low, ()):
            terms[t] = None
        canon = stack.canonical(low)
        if canon in stack.KIND and stack.KIND[canon] != stack.LANGUAGE:
            terms[canon] = None
    return {
        "terms": list(terms),
        "dependencies": sorted({d.lower() for d in deps})[:MAX_DEPENDENCIES],
        "extensions": dict(top),
        "stamp": stamp,
    }


def _stamp(root: str, names: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for name in names:
        try:
            st = os.lstat(os.path.join(root, name))
        except OSError:
            continue
        out[name] = [st.st_size, st.st_mtime]
    return out


def cache_path(home: str, root: str) -> str:
    """Where the profile of ``root`` is cached under the home.

    Args:
        home: ``$REFLECT_HOME``.
        root: The repository's root directory.

    Returns:
        ``<home>/recall/profiles/<hash of the root's path>.json``.
    """
    digest = hashlib.sha256(os.path.abspath(root).encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(home, "recall", "profiles", digest[:32] + ".json")


def profile(root: str | None, home: str | None = None, *, now: float | None = None) -> dict:
    """The cached profile of a repository, read again when a manifest changed.

    The cache is valid while the same manifests and lockfiles exist with the same sizes and
    mtimes (one ``lstat`` each), the root's mtime is unchanged (a file added or removed at
    the top), and it is younger than :data:`CACHE_TTL_SEC`. A cache that cannot be written
    (read-only home) costs only the next read.

    Args:
        root: The repository's root (``None``: the empty profile).
        home: ``$REFLECT_HOME`` (default: from the environment).
        now: The current time (tests).

    Returns:
        As :func:`read_profile`; ``{"terms": []…}`` for no root.
    """
    if not root or not os.path.isdir(root):
        return {"terms": [], "dependencies": [], "extensions": {}, "stamp": {}}
    if home is None:
        from reflect_jobs.envpaths import home_dir_str

        home = home_dir_str()
    now = time.time() if now is None else now
    path = cache_path(home, root)
    try:
        root_mtime = os.stat(root).st_mtime
    except OSError:
        root_mtime = 0.0
    cached = _read_cache(path)
    if (
        cached
        and cached.get("version") == CACHE_VERSION
        and cached.get("root") == os.path.abspath(root)
        and cached.get("root_mtime") == root_mtime
        and now - float(cached.get("at") or 0) < CACHE_TTL_SEC
        and _stamp(root, list(MANIFESTS + LOCKFILES)) == cached.get("profile", {}).get("stamp")
    ):
        return cached["profile"]
    prof = read_profile(root)
    _write_cache(
        path,
        {
            "version": CACHE_VERSION,
            "root": os.path.abspath(root),
            "root_mtime": root_mtime,
            "at": now,
            "profile": prof,
        },
    )
    return prof


def _read_cache(path: str) -> dict | None:
    text = _head(path, MANIFEST_BYTES)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("profile"), dict) else None


def _write_cache(path: str, data: dict) -> None:
    """Write the cache 0600 in 0700 directories; a failure is only a missed cache."""
    try:
        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        return


def profile_terms(prof: dict) -> list[str]:
    """The terms a learning's ``applies_to`` is compared with: stack terms and dependencies.

    Args:
        prof: From :func:`profile`.

    Returns:
        The stack terms, then every declared dependency name (so a learning about an
        unknown tool, ``pydantic``, fits a repository that depends on it).
    """
    return [*prof.get("terms", []), *prof.get("dependencies", [])]
