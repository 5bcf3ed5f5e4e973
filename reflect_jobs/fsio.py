"""Crash-safe file replacement (the one ``atomic_write``) and the one safe open for reading
files a session or a hook named (:func:`open_regular`).

A note "counts as written only when it exists and parses" (SPEC-drain §10 B12), a slice holds
user dialogue, and a hook settings file belongs to the user: in every case a torn write must
never be visible. So we write a sibling temp file, fsync it, ``os.replace`` it over the
target (atomic on POSIX within one directory) and fsync the directory so the rename itself
survives a power cut. Any failure before the rename leaves the old file untouched and removes
the temp file, so a full disk (ENOSPC) costs nothing but the error.

There is one mode rule, so no caller has to guess which copy of the function it got:
replacing a file keeps that file's mode unless ``mode=`` is given; a new file gets ``mode``
when given, else :data:`DEFAULT_MODE`. Stdlib only (the KB, the index and the installer all
use it; none of them should pull in more to write a file).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from reflect_jobs.faults import failpoint

#: The mode of a file created without ``mode=``: private (0600), because what we write —
#: notes with excerpts of private sessions, sidecars, index exports — is (ARCHITECTURE §2.3).
#: A file meant for others passes its own ``mode=``.
DEFAULT_MODE = 0o600


def atomic_write(path: Path | str, data: str | bytes, *, mode: int | None = None) -> None:
    """Atomically replace ``path`` with ``data`` (``str`` is encoded as UTF-8).

    The temp file is 0600 from ``mkstemp`` until it gets its final mode, so the content is
    never readable by others, not even for an instant. The parent directory must exist (a
    missing one is the caller's decision to make, with the caller's mode). Uses raw
    ``os.write`` on the descriptor so there is no hidden buffer whose flush could fail after
    we believe the data is down.

    Args:
        path: The file to create or replace. A symlink is replaced by a regular file; callers
            that must write through a link resolve it first.
        data: The whole new content.
        mode: Permission bits for the result. ``None``: keep the replaced file's mode, or
            :data:`DEFAULT_MODE` for a new file.

    Raises:
        OSError: The write, fsync or rename failed (the old file is untouched, the temp file
            removed); the caller decides whether to retry.
        UnicodeEncodeError: ``data`` is a ``str`` that cannot be encoded as UTF-8.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = DEFAULT_MODE
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(payload)
            while view:
                failpoint("atomic_write:write")
                written = os.write(fd, view)
                view = view[written:]
            failpoint("atomic_write:fsync")
            os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        failpoint("atomic_write:replace")
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Best effort: some filesystems (and non-POSIX platforms) refuse to fsync a directory.

    The rename has already happened at this point, so failing here would report a write as
    failed although the new, complete file is what every reader now sees.
    """
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


class NotRegularFile(OSError):
    """A path we were about to read is a FIFO, a device, a socket or a directory."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for binary reading only if it is a regular file; never block.

    ``open()`` on a FIFO waits for a writer for ever: a transcript path that named one hung
    prepare (and every later job of the worker thread). The file is opened non-blocking
    (which returns at once for a FIFO), checked with ``fstat`` on the descriptor itself —
    so a file swapped for a FIFO between a ``stat`` and the open is caught too — and only a
    regular file is handed back, switched to blocking reads.

    Args:
        path: The file (a symlink to a regular file is followed).

    Returns:
        The open file object (close it; use it in a ``with`` block).

    Raises:
        NotRegularFile: The path is not a regular file.
        OSError: It cannot be opened (missing, no permission…).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise NotRegularFile(errno.EINVAL, f"{kind} (refused: a read could block)", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
