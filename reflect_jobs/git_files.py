"""A checkout's git metadata, read from its files: no ``git`` process (stdlib only).

``git`` costs ~5 ms a call, paid at every session start, so the repository identity
(``repo.py``: the root and the ``origin`` remote) and the session-start task (``recall/
task_query.py``: the branch) read ``.git`` themselves. A cloned repository's ``.git`` is not
ours: only regular files are read, bounded (:func:`read_git_file`), so a FIFO or a huge file
planted there cannot hang or slow a hook.
"""

from __future__ import annotations

import os

MAX_CONFIG_BYTES = 256 * 1024


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


def read_git_file(path: str, limit: int = MAX_CONFIG_BYTES) -> str | None:
    """A small file of a checkout's git metadata (``config``, ``HEAD``, a ``.git`` file).

    Only a regular file is read, so a FIFO planted in a cloned repository's ``.git`` cannot
    hang a hook (``fsio.open_regular``).

    Args:
        path: The file.
        limit: At most this many bytes are read.

    Returns:
        Its text (undecodable bytes replaced), or ``None`` when it is missing, unreadable or
        not a regular file.
    """
    from reflect_jobs.fsio import open_regular

    try:
        with open_regular(path) as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def git_dir(root: str, *, common: bool = False) -> str | None:
    """The git directory of the checkout at ``root``.

    Args:
        root: A directory holding ``.git``.
        common: For a linked worktree, the directory it shares with its main checkout
            (``commondir``: config, refs) instead of its own (``HEAD``, index).

    Returns:
        ``.git`` for a plain checkout; for a ``.git`` *file* (worktree, submodule) the
        directory it points at, or that directory's ``commondir`` with ``common``; ``None``
        when unreadable.
    """
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        return dot
    text = read_git_file(dot)
    if not text or not text.startswith("gitdir:"):
        return None
    gitdir = text[len("gitdir:") :].strip().splitlines()[0].strip() if text.strip() else ""
    if not gitdir:
        return None
    gitdir = os.path.normpath(os.path.join(root, gitdir))
    shared = read_git_file(os.path.join(gitdir, "commondir")) if common else None
    if shared and shared.strip():
        gitdir = os.path.normpath(os.path.join(gitdir, shared.strip().splitlines()[0]))
    return gitdir


def git_config_path(root: str) -> str | None:
    """The config file of the repository at ``root``.

    Args:
        root: A directory holding ``.git``.

    Returns:
        Its ``config`` path (a linked worktree shares its main checkout's: :func:`git_dir`
        with ``common``), or ``None`` when the git directory cannot be read.
    """
    gitdir = git_dir(root, common=True)
    return os.path.join(gitdir, "config") if gitdir else None


def current_branch(root: str) -> str | None:
    """The branch checked out in the checkout at ``root`` (its own ``HEAD`` file: a linked
    worktree's, not its main checkout's).

    Args:
        root: A directory holding ``.git`` (:func:`git_root`).

    Returns:
        The branch name, or ``None`` for a detached ``HEAD``, a missing or unreadable one.
    """
    gitdir = git_dir(root)
    head = read_git_file(os.path.join(gitdir, "HEAD"), 4096) if gitdir else None
    prefix = "ref: refs/heads/"
    name = head[len(prefix) :].strip() if head and head.startswith(prefix) else ""
    return name.splitlines()[0] if name else None
