"""Private files: every directory we create is 0700, every file 0600 (stdlib only).

``$REFLECT_HOME`` holds the ledger (raw answers, job history), the queue, the slices (user
dialogue) and the logs; the KB holds excerpts of private sessions. Under the usual 022 umask
all of it used to be world-readable. Three layers, because no single one covers everything:

1. **A private umask in every entry point** (:func:`private_umask`: the hook, the CLI and so
   the consumer it execs; the service units set ``UMask=0077`` too). This is the root fix:
   it also covers what we do not create ourselves — SQLite's ``-wal``/``-shm`` files, Huey's
   queue database, nano-graphrag's files, the log handler's rotated file, temp files.
2. **Explicit modes where we create a file** (:func:`private_dir`, :func:`private_file`,
   ``fsio.atomic_write``'s 0600 default), so code called in-process under another umask
   (tests, a library user) is private as well. SQLite gives ``-wal``/``-shm`` the mode of
   the database file, so pre-creating the database 0600 makes them 0600 too.
3. **A repair pass on start** (:func:`fix_tree` of ``$REFLECT_HOME`` and the KB, run when a
   runtime is built), for installations made before this fix and files a person copied in.

The model CLI we spawn inherits the private umask; what it creates (its own session files) is
then private too, which costs it nothing.
"""

from __future__ import annotations

import os
import stat

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def restrict_umask() -> int:
    """Set the process umask to 077 and return the one it replaced.

    Returns:
        The previous umask (for the caller to restore).
    """
    return os.umask(PRIVATE_UMASK)


class private_umask:  # noqa: N801 - used like a function: ``with private_umask():``
    """``with private_umask():`` runs the body under umask 077, then restores the umask.

    Entry points (``hook.main``, the CLI) wrap their work in this, so the umask does not
    leak into a caller that runs them in-process (the tests do). A class rather than
    ``contextlib.contextmanager`` so the hook does not import ``contextlib``.
    """

    def __enter__(self) -> None:
        """Restrict the umask, keeping the previous one to restore."""
        self._previous = restrict_umask()

    def __exit__(self, *exc: object) -> None:
        """Put the previous umask back.

        Args:
            *exc: The exception triple, if any (not suppressed).
        """
        os.umask(self._previous)


def private_dir(path: str | os.PathLike[str]) -> None:
    """Create ``path`` (and missing parents) 0700; tighten it to 0700 if it exists.

    Args:
        path: The directory.

    Raises:
        OSError: The directory cannot be created or its mode changed.
    """
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    if stat.S_IMODE(os.stat(path).st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)


def private_file(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty with mode 0600 if missing (never truncates); tighten it if not.

    Used before a library opens a file with the process umask (SQLite databases: their
    ``-wal`` and ``-shm`` files then inherit the 0600 mode).

    Args:
        path: The file; its directory is created 0700 if missing.

    Raises:
        OSError: The file cannot be created or its mode changed.
    """
    parent = os.path.dirname(os.fspath(path))
    if parent and not os.path.isdir(parent):
        private_dir(parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, mode & 0o700)
    finally:
        os.close(fd)


def _private_mode(mode: int) -> int:
    """Group and other bits dropped; the owner keeps rw (and x where it had it)."""
    if stat.S_ISDIR(mode):
        return DIR_MODE
    return FILE_MODE | (stat.S_IMODE(mode) & 0o100)


def fix_tree(root: str | os.PathLike[str]) -> int:
    """Make ``root`` and everything under it private: directories 0700, files 0600.

    A file's owner-execute bit is kept (a KB kept in git may hold hook scripts). Symlinks
    are neither followed nor changed; files we may not chmod (another owner) are skipped,
    because a repair pass must never stop a worker from starting.

    Args:
        root: A directory (missing: nothing to do).

    Returns:
        The number of entries whose mode was changed.
    """
    changed = 0
    if not os.path.isdir(root) or os.path.islink(root):
        return 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in [None, *filenames]:
            path = dirpath if name is None else os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    continue
                want = _private_mode(st.st_mode)
                if stat.S_IMODE(st.st_mode) != want:
                    os.chmod(path, want)
                    changed += 1
            except OSError:
                continue
    return changed
