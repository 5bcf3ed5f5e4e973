"""Where a repository's memory lives: the mapping file, the default home, the home's label.

The memory home of a :class:`~reflect_jobs.repo.Repo` is the mapping file's answer
(``$REFLECT_MEMORY_HOMES``, default ``$REFLECT_HOME/memory-homes.conf``: ``PATTERN = DIRECTORY``
lines) or ``$GLOBAL_LEARNINGS_PATH/repos/<name>``. Since a name is a one-way hash of the key, a
home records the key in a one-line file ``repo-key`` beside ``reflections/``: whoever lists
``repos/`` (the dashboard, ``reflections list --all``, the periodic dedupe) reads the key there
instead of showing the directory's name. :func:`resolve` is what a ``--repo`` option (or a
tool's ``repo``) means. Stdlib only: the SessionStart hook reads the open items through it.
"""

from __future__ import annotations

import contextlib
import os

from .envpaths import kb_root_str, memory_homes_str
from .repo import MAX_KEY_CHARS, Repo, RepoError, as_key, is_home_name, repo_for

#: The file in a memory home that names its repository's key (one line).
KEY_FILE = "repo-key"

__all__ = ["KEY_FILE", "memory_home", "read_key_file", "record_key", "resolve"]


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

    No symbolic link is followed below what the user configured (:func:`_check_links`): a
    KB synced with git may carry ``repos/<name>`` or ``reflections/`` as a link, and the
    logs would then be read from — and appended to — wherever it points.

    Args:
        repo: The repository.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The directory (not created).

    Raises:
        RepoError: The mapping file is unreadable or has a malformed line, or the home (or
            its ``reflections/``) is a symbolic link the user did not configure.
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
        home = _first_existing(list(dict.fromkeys(targets)))
        _check_links(home)  # the mapped directory itself is the user's word: followed
        return home
    kb = kb_root_str(env)
    repos = os.path.join(kb, "repos")
    home = _first_existing([os.path.join(repos, n) for n in names])
    _check_links(kb, "repos", os.path.basename(home))
    return home


def _check_links(base: str, *parts: str) -> None:
    """Refuse a memory home with a symbolic link below ``base`` (the configured directory).

    Raises:
        RepoError: One line naming the link and the fix.
    """
    from .fsio import linked_part

    link = linked_part(base, *parts, "reflections")
    if link is not None:
        raise RepoError(
            f"memory home {link} is a symbolic link: refused (to keep a home elsewhere,"
            " map it in the REFLECT_MEMORY_HOMES file)"
        )


def read_key_file(home: str | os.PathLike[str], name: str | None = None) -> str | None:
    """The key a memory home records (:data:`KEY_FILE`), if it holds a believable one.

    Args:
        home: The memory home.
        name: The home's directory name, when the key must be one that names it (a home
            under ``repos/``: a file copied into the wrong home is not believed).

    Returns:
        The key, or ``None`` (no file, unreadable, or not a key of this home).
    """
    from .fsio import open_regular

    try:  # never through a link: the label of a synced home is anyone's text
        with open_regular(os.path.join(os.fspath(home), KEY_FILE), follow=False) as fh:
            text = fh.read(4 * MAX_KEY_CHARS).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    key = as_key(text.splitlines()[0] if text.strip() else "")
    if key is None or (name is not None and name not in Repo(key).names):
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
    if repo.home is None or not repo.labelled or as_key(repo.key) != repo.key:
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
