"""One repository identity: which repository a directory is, its key, its memory home. Stdlib only.

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
* ``home``: the mapping file's answer (``$REFLECT_MEMORY_HOMES``), else ``repos/<name>``.

A memory home records its key in a file ``repo-key`` beside ``reflections/``, since a name is
a one-way hash: whoever lists ``repos/`` (the dashboard, ``reflections list --all``, the
periodic dedupe) reads the key there instead of showing the directory's name.

Nothing is spawned (``git`` costs ~5 ms a call, paid at every session start) and only ``os``
is imported up front (``hashlib`` once a name is needed).
"""

from __future__ import annotations

import contextlib
import os

from .envpaths import kb_root_str, memory_homes_str

MAX_KEY_CHARS = 300
MAX_CONFIG_BYTES = 256 * 1024
#: The file in a memory home that names its repository's key (one line).
KEY_FILE = "repo-key"
_NAME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = _NAME_FIRST | frozenset("._-")
_MAX_NAME = 121

__all__ = [
    "KEY_FILE",
    "MAX_KEY_CHARS",
    "Repo",
    "RepoError",
    "as_key",
    "git_root",
    "is_home_name",
    "key_of",
    "memory_home",
    "normalise_remote",
    "origin_url",
    "read_key_file",
    "record_key",
    "repo_for",
    "resolve",
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
        if self._names is None:
            object.__setattr__(self, "_names", _names(self.key, self._style))
        return self._names  # type: ignore[return-value]

    @property
    def name(self) -> str:
        """The memory home's directory name (``github.com-acme-shop-c566806a``)."""
        return self.names[0]

    @property
    def log_dir(self) -> str:
        """``<home>/reflections``, where the host logs are.

        Raises:
            RepoError: The memory home was not resolved (see :func:`resolve`).
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


def git_root(start: str | os.PathLike[str]) -> str | None:
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


def _read(path: str, limit: int = MAX_CONFIG_BYTES) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
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
    url = origin_url(_read(config) or "") if config else None
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


# -- memory homes ------------------------------------------------------------------------


def _read_mapping(path: str) -> list[tuple[str, str]]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise RepoError(f"cannot read the memory-home mapping {path}: {why}") from None
    pairs = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, target = line.partition("=")
        if not sep or not pattern.strip() or not target.strip():
            raise RepoError(f"{path}:{n}: expected `PATTERN = DIRECTORY`")
        pairs.append((pattern.strip(), target.strip()))
    return pairs


def _first_existing(candidates: list[str]) -> str:
    return next((c for c in candidates if os.path.isdir(c)), candidates[0])


def memory_home(repo: Repo, environ: dict[str, str] | None = None) -> str:
    """The memory home of ``repo``: the mapping file's answer, else ``repos/<name>``.

    The mapping file (``$REFLECT_MEMORY_HOMES``) has ``PATTERN = DIRECTORY`` lines; a
    pattern is the key, a directory name, the root's path, or ``*`` (exact patterns win;
    the first matching line wins); ``{key}`` in DIRECTORY is the directory name. Among the
    directory names (:attr:`Repo.names`) the first whose home exists is taken, so a home
    written under an older name keeps being used.

    Args:
        repo: The repository.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The directory (not created).

    Raises:
        RepoError: The mapping file is unreadable or has a malformed line.
    """
    env = os.environ if environ is None else environ
    names = repo.names
    patterns = {repo.key, *names}
    if repo.root is not None:
        patterns.add(repo.root)
    mapping = _read_mapping(memory_homes_str(env))
    chosen = next((t for p, t in mapping if p in patterns or p.rstrip("/") in patterns), None)
    if chosen is None:
        chosen = next((t for p, t in mapping if p == "*"), None)
    if chosen is not None:
        targets = [os.path.expanduser(chosen.replace("{key}", n)) for n in names]
        return _first_existing(list(dict.fromkeys(targets)))
    repos = os.path.join(kb_root_str(env), "repos")
    return _first_existing([os.path.join(repos, n) for n in names])


def read_key_file(home: str | os.PathLike[str], name: str | None = None) -> str | None:
    """The key a memory home records (:data:`KEY_FILE`), if it holds a believable one.

    Args:
        home: The memory home.
        name: The home's directory name, when the key must be one that names it (a home
            under ``repos/``: a file copied into the wrong home is not believed).

    Returns:
        The key, or ``None`` (no file, unreadable, or not a key of this home).
    """
    text = _read(os.path.join(os.fspath(home), KEY_FILE), 4 * MAX_KEY_CHARS)
    if not text:
        return None
    key = as_key(text.splitlines()[0] if text.strip() else "")
    if key is None or (name is not None and name not in _names(key, "key")):
        return None
    return key


def record_key(repo: Repo) -> bool:
    """Write ``repo``'s key into its existing memory home, once (the home's label).

    Idempotent and crash-safe: the file is written whole under a temporary name and linked
    into place only if it is still missing, so a reader sees no file or the whole one, and
    an existing label is never replaced. A key not known from a root or given as a key
    (a home known only by its directory name), or one a reader would not take back
    (:func:`as_key`), is not written.

    Args:
        repo: A resolved repository (:attr:`Repo.home` set).

    Returns:
        True when the file was written now.
    """
    if repo.home is None or repo._style == "name" or as_key(repo.key) != repo.key:
        return False
    if not os.path.isdir(repo.home):
        return False
    path = os.path.join(repo.home, KEY_FILE)
    if os.path.lexists(path):
        return False
    tmp = os.path.join(repo.home, f".{KEY_FILE}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, (repo.key + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: replace, still atomic
            os.replace(tmp, path)
            return True
        return True
    except OSError:
        return False  # a label is a convenience: never fail the caller for it
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _by_name(name: str, environ: dict[str, str] | None) -> Repo:
    """A repository named by its memory home's directory name: the home's label, if any."""
    home = memory_home(Repo(name, style="name"), environ)
    key = read_key_file(home, name if os.path.basename(home) == name else None)
    if key is not None:
        return Repo(key, home=home, style="key")
    return Repo(name, home=home, style="name")


def resolve(
    repo: str | None, cwd: str | os.PathLike[str], environ: dict[str, str] | None = None
) -> Repo:
    """The repository a command means, with its memory home: ``--repo`` or the cwd's.

    Args:
        repo: The ``--repo`` value: an existing directory (its repository; a directory
            outside git is its own), a key (``github.com/acme/shop``, a remote URL, a
            root's path) or a memory home's directory name; ``None`` for the cwd's
            repository.
        cwd: The current directory.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The resolved :class:`Repo`, ``home`` set.

    Raises:
        RepoError: Not inside a git repository and no ``--repo``; ``--repo`` is neither a
            directory nor a key; or the mapping file is bad.
    """
    if repo is not None:
        path = os.path.expanduser(repo.strip())
        if repo.strip() and os.path.isdir(path):
            found = repo_for(os.path.abspath(path))
        elif is_home_name(repo.strip()):
            return _by_name(repo.strip(), environ)
        else:
            key = as_key(repo)
            if key is None:
                raise RepoError(f"--repo {repo!r} is neither a directory nor a repo key")
            found = Repo(key, style="key")
    else:
        found = repo_for(os.path.abspath(os.fspath(cwd)))
        if found is None or not found.in_git:
            raise RepoError("not inside a git repository: run it in one, or pass --repo")
    if found is None:  # not reached: an existing directory always has a repository
        raise RepoError(f"--repo {repo!r}: no repository")
    return found.at(memory_home(found, environ))
