"""One repository identity: which repository a directory is, its key and names. Stdlib only.

Everything that names a repository asks this module — a learning's scope (``learnings.repo_key``,
the note's ``repo:``), the reflection items and their index, the memory home, the session-start
block, ``status``, the MCP tools and the dashboard — so one repository has one name everywhere
(ARCHITECTURE §13, §14). A :class:`Repo` holds:

* ``root``: the nearest directory at or above the working directory holding ``.git`` (a
  directory, or a file ``gitdir: …`` in a worktree or submodule); a directory outside git is
  its own root; a directory that vanished belongs to the repository of its nearest remaining
  ancestor.
* ``key``: the ``origin`` remote normalised to ``host/path`` (scheme, user, password, port,
  query and ``.git`` dropped; host lower-cased), else the root's path. The same on every
  clone, and never a credential. It is also what people read (``display``).
* ``name``: the memory home's directory under ``$GLOBAL_LEARNINGS_PATH/repos/``, a file-safe
  slug of the key and 8 hex digits of its sha256 (``github.com-acme-shop-c566806a``); for a
  key that is a path, the directory's basename and a hash of the path. These are the names
  memory homes have always had, so a home written before this module keeps its place.
* ``home``: where its memory lives, once :func:`reflect_jobs.repo_home.resolve` found it (the
  mapping file, the default ``repos/<name>``, and the home's ``repo-key`` label are there).

Nothing is spawned (``git`` costs ~5 ms a call, paid at every session start) and only ``os``
is imported up front (``hashlib`` once a name is needed).
"""

from __future__ import annotations

import os

from .git_files import git_config_path, git_root, read_git_file

MAX_KEY_CHARS = 300
_NAME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = _NAME_FIRST | frozenset("._-")
_MAX_NAME = 121

__all__ = [
    "MAX_KEY_CHARS",
    "Repo",
    "RepoError",
    "as_key",
    "git_root",
    "is_home_name",
    "key_of",
    "normalise_remote",
    "origin_url",
    "repo_for",
]


class RepoError(ValueError):
    """The repository or its memory home cannot be determined; the text says why."""


class Repo:
    """A repository: its key, where it was found, and (once resolved) its memory home.

    A plain immutable class, not a dataclass: the SessionStart hook builds one on every
    session start, and ``dataclasses`` alone would cost it more than everything else it does.
    """

    __slots__ = ("_names", "_style", "home", "in_git", "key", "root")
    key: str
    root: str | None
    in_git: bool
    home: str | None
    _style: str
    _names: tuple[str, ...] | None

    def __init__(
        self,
        key: str,
        root: str | None = None,
        home: str | os.PathLike[str] | None = None,
        *,
        in_git: bool = False,
        style: str = "key",
    ) -> None:
        """Hold the values; the directory names are computed when first asked for.

        Args:
            key: The canonical key (see the module docstring).
            root: The directory it was found at; ``None`` when named by key.
            home: The memory home, once known.
            in_git: Whether ``root`` holds ``.git`` (a plain directory is its own root).
            style: Where the key came from, which decides the directory names: ``remote``
                (a remote with a host), ``local`` (a local-path or ``file://`` remote),
                ``path`` (no remote: the root's path), ``key`` (given as a key) or ``name``
                (a memory home known only by its directory name).
        """
        for slot, value in (
            ("key", key),
            ("root", root),
            ("home", os.fspath(home) if home is not None else None),
            ("in_git", in_git),
            ("_style", style),
            ("_names", None),
        ):
            object.__setattr__(self, slot, value)

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
    def display(self) -> str:
        """What people read (CLI, status, context block, MCP, dashboard): the key itself.

        The key is readable by design (``github.com/acme/shop``), so what a person sees is
        also what ``--repo`` takes back.
        """
        return self.key

    @property
    def names(self) -> tuple[str, ...]:
        """The memory home's directory names: the first is a new home's, the rest aliases.

        An alias is the name code before this module gave a home for the same key where the
        rules differed (a local-path remote), or the other reading of a bare path key.
        """
        names = self._names
        if names is None:
            names = _names(self.key, self._style)
            object.__setattr__(self, "_names", names)
        return names

    @property
    def labelled(self) -> bool:
        """Whether the key may label a home: known from a root or given, not a directory name."""
        return self._style != "name"

    @property
    def name(self) -> str:
        """The memory home's directory name (``github.com-acme-shop-c566806a``)."""
        return self.names[0]

    @property
    def log_dir(self) -> str:
        """``<home>/reflections``, where the host logs are.

        Raises:
            RepoError: The memory home was not resolved (:func:`reflect_jobs.repo_home.resolve`).
        """
        if self.home is None:
            raise RepoError(f"the memory home of {self.key} is not resolved")
        return os.path.join(self.home, "reflections")

    def at(self, home: str | os.PathLike[str]) -> Repo:
        """The same repository with its memory home set.

        Args:
            home: The memory home.

        Returns:
            A new :class:`Repo`.
        """
        out = Repo(self.key, self.root, home, in_git=self.in_git, style=self._style)
        object.__setattr__(out, "_names", self._names)
        return out


# -- the root and the remote -------------------------------------------------------------


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


def _is_scp(url: str) -> bool:
    """``[user@]host:path``: a colon before any slash, and not a local path."""
    return ":" in url and not url.startswith(("/", ".")) and "/" not in url.split(":", 1)[0]


def _host(authority: str) -> str:
    """The host of ``[user[:password]@]host[:port]``, lower-cased (IPv6 in brackets kept)."""
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        return host[: host.find("]") + 1 or len(host)].lower()
    return host.split(":", 1)[0].lower()


def normalise_remote(url: str) -> str:
    """A remote URL as a key: ``host/path``; no scheme, user, password, port, query or ``.git``.

    ``git@github.com:Acme/w.git``, ``https://alice:tok@GitHub.com/Acme/w`` and
    ``ssh://git@github.com:22/Acme/w.git/`` all give ``github.com/Acme/w``: credentials never
    reach a key, a file name or a log line.

    Args:
        url: A git remote URL (``https://…``, ``ssh://…``, scp-like ``git@host:path``, or a
            local path).

    Returns:
        ``host/path`` with the host lower-cased; a local path (or ``file://`` URL) as its
        normalised path; cut to :data:`MAX_KEY_CHARS`.
    """
    url = url.strip()
    if "://" in url:
        scheme, _, rest = url.partition("://")
        rest = rest.split("#", 1)[0].split("?", 1)[0]  # a token may ride in the query
        authority, _, path = rest.partition("/")
        if scheme.lower() == "file":
            return os.path.normpath("/" + path)[:MAX_KEY_CHARS]
        host = _host(authority)
    elif _is_scp(url):
        region, slash, tail = url.partition("/")
        host, _, first = region.rpartition("@")[2].partition(":")
        host, path = host.lower(), first + slash + tail
    else:
        return os.path.normpath(url)[:MAX_KEY_CHARS]
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host}/{path.rstrip('/')}"[:MAX_KEY_CHARS]


def _is_local_remote(url: str) -> bool:
    url = url.strip()
    if "://" in url:
        return url.partition("://")[0].lower() == "file"
    return not _is_scp(url)


def repo_for(cwd: str | None) -> Repo | None:
    """The repository of a working directory (the resolver; see the module docstring).

    Args:
        cwd: An absolute directory (``~`` expanded); ``None``, ``""``, a relative path, or
            a vanished path outside any remaining repository gives ``None``.

    Returns:
        The :class:`Repo` (no memory home yet): ``in_git`` False for a directory outside git
        (its own root, keyed by its path); a directory that vanished belongs to the
        repository of its nearest remaining ancestor, if that is in one.
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
        return Repo(path[:MAX_KEY_CHARS], path, style="path")
    config = git_config_path(root)
    url = origin_url(read_git_file(config) or "") if config else None
    if not url:
        return Repo(root[:MAX_KEY_CHARS], root, in_git=True, style="path")
    style = "local" if _is_local_remote(url) else "remote"
    return Repo(normalise_remote(url), root, in_git=True, style=style)


# -- keys given as text ------------------------------------------------------------------


def is_home_name(text: str) -> bool:
    """Whether ``text`` has the shape of a memory home's directory name.

    Args:
        text: A directory name or a ``--repo`` value.

    Returns:
        True for lowercase ``[a-z0-9._-]`` names up to 121 characters starting with a letter
        or digit (never ``.`` or ``..``).
    """
    return (
        0 < len(text) <= _MAX_NAME
        and text[0] in _NAME_FIRST
        and all(c in _NAME_CHARS for c in text)
    )


def as_key(text: str) -> str | None:
    """A repository key given as text (``--repo``, a tool's ``repo``), normalised.

    Args:
        text: ``github.com/acme/shop``, a remote URL (normalised: credentials dropped), or
            an absolute path (a repository without a remote).

    Returns:
        The key, or ``None`` when ``text`` cannot be one (empty, control characters, no
        ``/``).
    """
    text = text.strip()
    if not text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        return None
    if "://" in text or _is_scp(text):
        text = normalise_remote(text)
    elif text.startswith("~"):
        text = os.path.normpath(os.path.expanduser(text))
    if "/" not in text:
        return None
    return text.rstrip("/")[:MAX_KEY_CHARS] or None


def key_of(text: str | None) -> str | None:
    """A tool's ``repo`` argument as a key: a directory's repository, else the key given.

    Args:
        text: A directory, or a key; ``None``/``""`` for none.

    Returns:
        The key, or ``None``.
    """
    if not text or not str(text).strip():
        return None
    text = str(text).strip()
    path = os.path.expanduser(text)
    if os.path.isabs(path) and os.path.isdir(path):
        found = repo_for(path)
        if found is not None:
            return found.key
    return as_key(text) or text[:MAX_KEY_CHARS]


def listed(ref: Repo | None, entries: object) -> bool:
    """Whether a repository is one of ``entries`` (the ``ignore`` list of the config file).

    ``reflect-jobs ignore`` writes keys; a hand-written entry may also be a remote URL
    (normalised, credentials dropped) or the repository's root directory.

    Args:
        ref: The repository (``None``: not in any).
        entries: The list as the config file holds it (non-strings are skipped).

    Returns:
        True when an entry names it.
    """
    if ref is None or not isinstance(entries, list | tuple):
        return False
    for entry in entries:
        if not isinstance(entry, str) or not entry.strip():
            continue
        if as_key(entry) == ref.key or entry == ref.key:
            return True
        path = os.path.expanduser(entry.strip())
        if ref.root and os.path.isabs(path) and os.path.normpath(path) == ref.root:
            return True
    return False


# -- directory names ---------------------------------------------------------------------


def _slug(text: str, hashed: str) -> str:
    """``[a-z0-9._-]`` runs of ``text`` (≤ 80) and 8 hex digits of the sha256 of ``hashed``."""
    import hashlib

    out: list[str] = []
    unsafe_run = False
    for c in text.lower():
        if c in _NAME_CHARS:
            out.append(c)
            unsafe_run = False
        elif not unsafe_run:
            out.append("-")
            unsafe_run = True
    slug = "".join(out).strip(".-")[:80] or "repo"
    return f"{slug}-{hashlib.sha256(hashed.encode('utf-8')).hexdigest()[:8]}"


def _path_name(key: str) -> str:
    return _slug(os.path.basename(key.rstrip("/")), key)


def _local_remote_name(key: str) -> str:
    """The name a local-path remote's home had before: its path without ``/`` ends or ``.git``."""
    path = key.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    path = path.rstrip("/")
    return _slug(path, path)


def _names(key: str, style: str) -> tuple[str, ...]:
    if style == "name":
        return (key,)
    if style == "remote":
        return (_slug(key, key),)
    if style == "path":
        return (_path_name(key),)
    if style == "local":
        return (_local_remote_name(key), _path_name(key))
    if key.startswith("/"):  # given as a key: a root path, or a local-path remote
        return (_path_name(key), _local_remote_name(key))
    return (_slug(key, key),)
