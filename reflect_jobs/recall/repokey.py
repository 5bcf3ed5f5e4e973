"""Which repository a working directory belongs to, keyed stably, with the stdlib only.

A learning is scoped to the repository it was learned in (ARCHITECTURE §13). The key must be
the same on the worker (from the transcript's ``cwd``) and in the SessionStart hook (from the
payload's ``cwd``), and stable across clones: the origin remote URL when there is one,
normalised (``git@github.com:o/r.git`` and ``https://user:tok@github.com/o/r`` are both
``github.com/o/r``; credentials are never part of a key), else the git root's path.

Nothing is spawned (``git`` costs ~5 ms a call, paid at every session start): the root is
found by walking up for ``.git`` (a directory, or a file ``gitdir: …`` in a worktree or a
submodule) and the remote is read from the config file, following ``commondir`` for a linked
worktree.
"""

from __future__ import annotations

import os

MAX_CONFIG_BYTES = 256 * 1024
MAX_KEY_CHARS = 300


class RepoRef:
    """A repository: its stable ``key`` and the ``root`` directory it was found at."""

    __slots__ = ("key", "root")

    def __init__(self, key: str, root: str) -> None:
        """Hold the pair (a plain class: the hook path avoids ``dataclasses``' import cost).

        Args:
            key: The normalised origin URL, else the root path.
            root: The directory holding ``.git`` (or the directory itself outside git).
        """
        self.key = key
        self.root = root

    def __repr__(self) -> str:
        return f"RepoRef(key={self.key!r}, root={self.root!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RepoRef) and (self.key, self.root) == (other.key, other.root)

    def __hash__(self) -> int:
        return hash((self.key, self.root))


def git_root(start: str) -> str | None:
    """The nearest directory at or above ``start`` holding a ``.git`` entry.

    Args:
        start: A directory (or file) path; relative paths are made absolute.

    Returns:
        The absolute, symlink-resolved root, or ``None`` when there is none up to ``/``.
    """
    path = os.path.realpath(start)
    if not os.path.isdir(path):
        path = os.path.dirname(path)
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(MAX_CONFIG_BYTES)
    except OSError:
        return None


def git_config_path(root: str) -> str | None:
    """The config file of the repository at ``root``.

    Args:
        root: A directory holding ``.git``.

    Returns:
        ``.git/config`` for a plain checkout; for a ``.git`` *file* (worktree, submodule)
        the config of the directory it points at, or of that directory's ``commondir``
        (a linked worktree shares its main checkout's config); ``None`` when unreadable.
    """
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        return os.path.join(dot, "config")
    text = _read(dot)
    if not text or not text.startswith("gitdir:"):
        return None
    gitdir = text[len("gitdir:") :].strip().splitlines()[0].strip() if text.strip() else ""
    if not gitdir:
        return None
    gitdir = os.path.normpath(os.path.join(root, gitdir))
    common = _read(os.path.join(gitdir, "commondir"))
    if common and common.strip():
        gitdir = os.path.normpath(os.path.join(gitdir, common.strip().splitlines()[0]))
    return os.path.join(gitdir, "config")


def origin_url(config_text: str) -> str | None:
    """The ``url`` of ``[remote "origin"]`` in a git config file's text.

    Args:
        config_text: The config file's contents.

    Returns:
        The URL as written (stripped), or ``None`` when there is no origin URL.
    """
    in_origin = False
    for raw in config_text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            header = line.strip("[]").strip()
            in_origin = header.replace(" ", "") in ('remote"origin"', "remote.origin")
            continue
        if in_origin and "=" in line:
            name, _, value = line.partition("=")
            if name.strip().lower() == "url":
                value = value.strip().strip('"').strip()
                return value or None
    return None


def normalise_remote(url: str) -> str:
    """A remote URL as a stable key: host and path, no scheme, user, password, port or ``.git``.

    Args:
        url: A git remote URL (``https://…``, ``ssh://…``, scp-like ``git@host:path``, or a
            local path).

    Returns:
        ``host/path`` lower-cased in the host (``github.com/Owner/repo``); a local path is
        returned normalised; cut to :data:`MAX_KEY_CHARS`.
    """
    url = url.strip()
    host, path = "", url
    if "://" in url:
        scheme, _, rest = url.partition("://")
        authority, _, path = rest.partition("/")
        if scheme.lower() == "file":
            return os.path.normpath("/" + path)[:MAX_KEY_CHARS]
        authority = authority.rpartition("@")[2]  # drop user:password@
        host = authority.split(":")[0] if not authority.startswith("[") else authority
    elif ":" in url and not url.startswith("/") and "/" not in url.split(":", 1)[0]:
        authority, _, path = url.partition(":")  # scp-like user@host:path
        host = authority.rpartition("@")[2]
    else:
        return os.path.normpath(url)[:MAX_KEY_CHARS]
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host.lower()}/{path.rstrip('/')}"[:MAX_KEY_CHARS]


def repo_for(cwd: str | None) -> RepoRef | None:
    """The repository of a working directory (see the module docstring).

    Args:
        cwd: The session's working directory; ``None``, ``""`` or a path that no longer
            exists gives ``None``.

    Returns:
        ``RepoRef(key, root)``: ``key`` is the normalised origin URL, else the root path;
        a directory outside any git repository is its own root; a directory that vanished
        belongs to the repository of its nearest remaining ancestor, if that is in one.
        ``None`` when ``cwd`` is unusable.
    """
    if not isinstance(cwd, str) or not cwd.strip():
        return None
    cwd = os.path.expanduser(cwd.strip())
    if not os.path.isabs(cwd):
        return None
    if not os.path.isdir(cwd):
        # A subdirectory that vanished still belongs to its repository, if that remains.
        parent = os.path.dirname(os.path.normpath(cwd))
        while parent != os.path.dirname(parent) and not os.path.isdir(parent):
            parent = os.path.dirname(parent)
        root = git_root(parent) if os.path.isdir(parent) else None
        if root is None:
            return None
    else:
        root = git_root(cwd)
    if root is None:
        path = os.path.realpath(cwd)
        return RepoRef(path[:MAX_KEY_CHARS], path)
    config = git_config_path(root)
    url = origin_url(_read(config) or "") if config else None
    key = normalise_remote(url) if url else root
    return RepoRef(key[:MAX_KEY_CHARS], root)
