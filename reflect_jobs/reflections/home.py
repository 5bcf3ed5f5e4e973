"""Which repository, and where its memory lives: git root, repo key, memory home. Stdlib only.

The repository is the git root above the current directory (a ``.git`` directory, or a
``.git`` file as in a worktree or submodule). Its key names it the same on every machine: the
``origin`` remote's URL when there is one (so two clones in different places share one
memory), else the root's path. The key is a readable, file-safe slug plus a short hash of the
normalised URL or path, so two remotes that slug alike still differ.

The memory home is ``$GLOBAL_LEARNINGS_PATH/repos/<key>/`` unless the mapping file says
otherwise (people who keep memory in a dotfiles repository point it there). The mapping file
is ``$REFLECT_MEMORY_HOMES``, default ``$REFLECT_HOME/memory-homes.conf``; each line is
``PATTERN = DIRECTORY`` where PATTERN is a repo key, a normalised remote
(``github.com/owner/repo``), a repository root path, or ``*``; DIRECTORY may use ``~`` and
``{key}``. Exact patterns win over ``*``; a line starting with ``#`` is a comment.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import re
from pathlib import Path

from reflect_jobs.envpaths import environ as merged_environ
from reflect_jobs.envpaths import home_dir_str

_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>(?!//).+)$")
_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,120}$")

__all__ = [
    "HomeError",
    "Repo",
    "git_root",
    "is_repo_key",
    "memory_home",
    "normalise_remote",
    "origin_url",
    "repo_key",
    "resolve_repo",
]


class HomeError(ValueError):
    """The repository or its memory home cannot be determined; the text says why."""


class Repo:
    """A resolved repository: its key, its root (``None`` when given by key) and memory home.

    A plain immutable class, not a dataclass: the SessionStart hook imports this module to
    find the open items (``recall/items.py``), and ``dataclasses`` alone (``inspect``,
    ``ast``…) would cost it more than everything else it does.
    """

    __slots__ = ("home", "key", "root")
    key: str
    root: Path | None
    home: Path

    def __init__(self, key: str, root: Path | None, home: Path) -> None:
        """Hold the three values.

        Args:
            key: The repo key.
            root: The repository root, or ``None`` when it was named by key.
            home: The memory home.
        """
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "home", home)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Repo is immutable; cannot set {name}")

    def __repr__(self) -> str:
        return f"Repo(key={self.key!r}, root={self.root!r}, home={self.home!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Repo):
            return NotImplemented
        return (self.key, self.root, self.home) == (other.key, other.root, other.home)

    def __hash__(self) -> int:
        return hash((self.key, self.root, self.home))

    @property
    def log_dir(self) -> Path:
        """``<home>/reflections``, where the host logs are."""
        return self.home / "reflections"


def git_root(cwd: Path | str) -> Path | None:
    """The nearest directory at or above ``cwd`` holding a ``.git`` directory or file.

    Args:
        cwd: Where to start (made absolute, symlinks resolved).

    Returns:
        The repository root, or ``None`` outside any repository.
    """
    p = Path(cwd).resolve()
    for d in (p, *p.parents):
        if (d / ".git").exists():
            return d
    return None


def _git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:
        first = dot.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    gitdir = Path(first[len("gitdir:") :].strip())
    gitdir = gitdir if gitdir.is_absolute() else (root / gitdir)
    try:  # a worktree's config is in the common directory
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        return (gitdir / common).resolve() if not Path(common).is_absolute() else Path(common)
    except OSError:
        return gitdir


def origin_url(root: Path) -> str | None:
    """The ``origin`` remote's URL from the repository's git config, read without git.

    Args:
        root: The repository root (:func:`git_root`).

    Returns:
        The URL, or ``None`` when there is no readable config or no ``origin``.
    """
    gitdir = _git_dir(root)
    if gitdir is None:
        return None
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read(gitdir / "config", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    for section in ('remote "origin"', "remote origin"):
        if parser.has_option(section, "url"):
            url = parser.get(section, "url").strip().strip('"')
            return url or None
    return None


def normalise_remote(url: str) -> str:
    """``host/path`` of a remote URL: no scheme, credentials, port or ``.git``; host lowercased.

    ``git@github.com:Owner/Repo.git``, ``https://user:tok@GitHub.com/Owner/Repo`` and
    ``ssh://git@github.com:22/Owner/Repo.git`` all give ``github.com/Owner/Repo``.

    Args:
        url: The remote URL as git stores it.

    Returns:
        The normalised form (a local path remote keeps its path).
    """
    url = url.strip()
    if "://" in url:
        rest = url.split("://", 1)[1]
        hostpart, _, path = rest.partition("/")
        hostpart = hostpart.rsplit("@", 1)[-1].split(":", 1)[0].lower()
    elif (m := _SCP.match(url)) and not url.startswith(("/", ".")):
        hostpart, path = m.group("host").lower(), m.group("path")
    else:
        hostpart, path = "", url
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{hostpart}/{path}" if hostpart else path.rstrip("/")


def _slug(text: str, hashed: str) -> str:
    slug = _SLUG_UNSAFE.sub("-", text.lower()).strip(".-")[:80] or "repo"
    return f"{slug}-{hashlib.sha256(hashed.encode('utf-8')).hexdigest()[:8]}"


def repo_key(root: Path) -> str:
    """The repository's name in memory: a slug of its remote (or path) and a short hash.

    Args:
        root: The repository root (:func:`git_root`).

    Returns:
        E.g. ``github.com-owner-repo-1a2b3c4d`` for a clone of ``github.com/owner/repo``,
        ``myproject-9f8e7d6c`` for a repository without ``origin`` (hash of its path).
    """
    url = origin_url(root)
    if url:
        norm = normalise_remote(url)
        return _slug(norm, norm)
    resolved = str(Path(root).resolve())
    return _slug(Path(resolved).name, resolved)


def is_repo_key(text: str) -> bool:
    """Whether ``text`` has the shape of a repo key (safe as one directory name).

    Args:
        text: A ``--repo`` value.

    Returns:
        True for lowercase ``[a-z0-9._-]`` names up to 121 characters.
    """
    return bool(_KEY.match(text)) and text not in (".", "..")


def _mapping_file(environ: dict[str, str]) -> Path:
    raw = (environ.get("REFLECT_MEMORY_HOMES") or "").strip()
    return Path(raw).expanduser() if raw else Path(home_dir_str(environ)) / "memory-homes.conf"


def _read_mapping(path: Path) -> list[tuple[str, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise HomeError(f"cannot read the memory-home mapping {path}: {exc.strerror}") from None
    pairs = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, target = line.partition("=")
        if not sep or not pattern.strip() or not target.strip():
            raise HomeError(f"{path}:{n}: expected `PATTERN = DIRECTORY`")
        pairs.append((pattern.strip(), target.strip()))
    return pairs


def memory_home(key: str, root: Path | None = None, environ: dict[str, str] | None = None) -> Path:
    """The memory home of the repository ``key``: the mapping file's answer or the default.

    Args:
        key: The repo key (:func:`repo_key`).
        root: The repository root, so a mapping may name it by path or by remote.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The directory (not created).

    Raises:
        HomeError: The mapping file is unreadable or has a malformed line.
    """
    env = merged_environ(environ)
    names = {key}
    if root is not None:
        names.add(str(Path(root).resolve()))
        url = origin_url(root)
        if url:
            names.add(normalise_remote(url))
    mapping = _read_mapping(_mapping_file(env))
    chosen = next((t for p, t in mapping if p in names or p.rstrip("/") in names), None)
    if chosen is None:
        chosen = next((t for p, t in mapping if p == "*"), None)
    if chosen is not None:
        return Path(os.path.expanduser(chosen.replace("{key}", key)))
    kb_raw = (env.get("GLOBAL_LEARNINGS_PATH") or "").strip()
    kb = Path(kb_raw).expanduser() if kb_raw else Path.home() / ".learnings"
    return kb / "repos" / key


def resolve_repo(repo: str | None, cwd: Path | str, environ: dict[str, str] | None = None) -> Repo:
    """The repository a command means: ``--repo`` (a directory or a key) or the cwd's git root.

    Args:
        repo: The ``--repo`` value: an existing directory (its git root, or itself), or a
            repo key; ``None`` for the current directory.
        cwd: The current directory.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The resolved repository.

    Raises:
        HomeError: Not inside a repository and no ``--repo``, or ``--repo`` is neither a
            directory nor a key, or the mapping file is bad.
    """
    if repo is not None:
        p = Path(repo).expanduser()
        if p.is_dir():
            root = git_root(p) or p.resolve()
        elif is_repo_key(repo):
            return Repo(repo, None, memory_home(repo, None, environ))
        else:
            raise HomeError(f"--repo {repo!r} is neither a directory nor a repo key")
    else:
        root = git_root(cwd)
        if root is None:
            raise HomeError("not inside a git repository: run it in one, or pass --repo")
    key = repo_key(root)
    return Repo(key, root, memory_home(key, root, environ))
