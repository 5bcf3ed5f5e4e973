"""Crash-safe file replacement.

A note "counts as written only when it exists and parses" (SPEC-drain §10 B12), so a torn
write must never be visible: we write a sibling temp file, fsync it, ``os.replace`` it over the
target (atomic on POSIX within one directory) and fsync the directory so the rename itself
survives a power cut. Any failure before the rename leaves the old file untouched and removes
the temp file, so a full disk (ENOSPC) costs nothing but the error.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ..faults import failpoint

_DEFAULT_MODE = 0o644


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Atomically replace ``path`` with ``data`` (``str`` is encoded as UTF-8).

    The file keeps the mode of the file it replaces (0644 when new) unless ``mode`` is
    given — private files such as slices pass 0600, and the temp file is already 0600 from
    ``mkstemp``, so the content is never readable by others, not even for an instant.

    Raises the original ``OSError`` (or ``UnicodeEncodeError``) after cleaning up; the caller
    decides whether to retry. Uses raw ``os.write`` on the descriptor so there is no hidden
    buffer whose flush could fail after we believe the data is down.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = _DEFAULT_MODE
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
