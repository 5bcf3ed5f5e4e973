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

The manifests and lockfiles are read by :mod:`.manifests`; this module walks the tree, turns
what was found into terms and keeps the cache.

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
import time

from . import stack
from .manifests import (
    LOCK_BYTES,
    LOCKFILES,
    MANIFEST_BYTES,
    MANIFESTS,
    MARKS,
    NAME,
    PACKAGES,
    head,
    lock_names,
    manifest_names,
)

WALK_ENTRIES = 4000
WALK_DEPTH = 3
TOP_EXTENSIONS = 6
#: An extension counts when it is at least this share of the files seen.
EXTENSION_SHARE = 0.04
CACHE_TTL_SEC = 86400.0
#: Bumped when what a profile holds changes (2: versions and section names are not names).
CACHE_VERSION = 2
MAX_DEPENDENCIES = 400

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
            text = head(path, LOCK_BYTES)
            if text:
                deps.update(n.lower() for n in lock_names().findall(text))
            continue
        text = head(path, MANIFEST_BYTES)
        if text:
            deps.update(n for n in manifest_names(name, text) if n and NAME.match(n))
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
    text = head(path, MANIFEST_BYTES)
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


#: A language with fewer files than this share of the main language's is on the side (a
#: C++ project's Python conversion scripts, a web app's shell scripts).
SIDE_SHARE = 0.25
#: Languages counted as one for their shares: a rule about JavaScript is about TypeScript
#: code too, one about C about C++.
_FAMILY = {"javascript": "typescript", "c": "cpp"}


def side_languages(prof: dict) -> frozenset[str]:
    """The repository's side languages: it has them, but few of its files are in them.

    The general section ranks a rule about a side language (and its frameworks: a numpy
    rule in a C++ project whose scripts use numpy) after the rules about the language the
    repository is written in (``relevance.fitting_globals``); it still fits, and is told
    when a prompt needs it.

    Args:
        prof: From :func:`profile`.

    Returns:
        Each language (with its family, :data:`_FAMILY`) whose files are fewer than
        :data:`SIDE_SHARE` of the main language's among the top extensions, and each
        language the manifests name with no such file; empty when no file was counted.
    """
    counts: dict[str, int] = {}
    for ext, n in (prof.get("extensions") or {}).items():
        for term in EXTENSIONS.get(ext, ()):
            if stack.KIND.get(term) == stack.LANGUAGE:
                fam = _FAMILY.get(term, term)
                counts[fam] = counts.get(fam, 0) + int(n)
    if not counts:
        return frozenset()
    top = max(counts.values())
    named = {
        _FAMILY.get(t, t) for t in prof.get("terms", ()) if stack.KIND.get(t) == stack.LANGUAGE
    }
    side = {fam for fam in set(counts) | named if counts.get(fam, 0) < top * SIDE_SHARE}
    return frozenset(side | {t for t, fam in _FAMILY.items() if fam in side})
