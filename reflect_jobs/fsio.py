"""Crash-safe file replacement (the one ``atomic_write``) and the one safe open for reading
files a session, a hook, a synced KB or a memory home holds (:func:`open_regular`,
:func:`open_inside`, :func:`read_inside`, :func:`linked_part`).

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

Reading is the other half. What we read from ``documents/``, a memory home or a harness's
memory directory may have arrived by ``git pull`` from a machine we do not control: a note
``documents/lrn-x.md`` that is a symbolic link to ``~/.ssh/id_ed25519`` must never be read
(it was: ``get`` returned the key), and a ``documents/`` that is itself a link must not carry
our writes or our ``chmod`` to wherever it points. So such files are opened below a trusted
base (the path the user configured) one component at a time, each with ``O_NOFOLLOW`` on the
directory descriptor of the one before (:func:`open_inside`: a link anywhere below the base,
swapped in at any moment, fails the open), only a regular file is handed back, and a read
is bounded (:func:`read_inside`). The SessionStart hook imports this module (memory homes),
so it imports nothing heavy at module level.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # the stdlib idiom: no `typing` import at run time (the hook imports us)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import BinaryIO

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
    import tempfile  # here: the hook imports this module for its read checks only

    from reflect_jobs.faults import failpoint

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


class UnsafePath(OSError):
    """A path we were about to read or write through is (or passes) a symbolic link, or
    would lead outside the directory it must stay in; ``str()`` is one line saying which."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class TooLarge(OSError):
    """A file is larger than its reader's bound (it is not read)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def _regular_file(fd: int, shown: str) -> BinaryIO:
    """The open descriptor as a blocking binary file if it is a regular file; closed if not."""
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise NotRegularFile(errno.EINVAL, f"{kind} (refused: a read could block)", shown)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _link_refused(shown: str) -> UnsafePath:
    return UnsafePath(
        errno.ELOOP, f"{shown} is a symbolic link (refused: it is never followed here)", shown
    )


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> BinaryIO:
    """Open ``path`` for binary reading only if it is a regular file; never block.

    ``open()`` on a FIFO waits for a writer for ever: a transcript path that named one hung
    prepare (and every later job of the worker thread). The file is opened non-blocking
    (which returns at once for a FIFO), checked with ``fstat`` on the descriptor itself —
    so a file swapped for a FIFO between a ``stat`` and the open is caught too — and only a
    regular file is handed back, switched to blocking reads.

    Args:
        path: The file.
        follow: Follow a symbolic link in the last component (a transcript path the harness
            named); ``False`` refuses one (``O_NOFOLLOW``): a file in a directory others
            may fill (a memory home's log, a note).

    Returns:
        The open file object (close it; use it in a ``with`` block).

    Raises:
        NotRegularFile: The path is not a regular file.
        UnsafePath: ``follow`` is false and the path is a symbolic link.
        OSError: It cannot be opened (missing, no permission…).
    """
    try:
        fd = os.open(path, _READ_FLAGS | (0 if follow else _NOFOLLOW))
    except OSError as exc:
        if not follow and exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise _link_refused(os.fspath(path)) from None
        raise
    return _regular_file(fd, os.fspath(path))


def _parts(parts: Sequence[str]) -> list[str]:
    """The components below a base: each one plain name (no ``/``, ``.``, ``..`` or NUL)."""
    out = []
    for part in parts:
        for piece in str(part).split("/"):
            if piece in ("", "."):
                continue
            if piece == ".." or "\0" in piece:
                raise UnsafePath(errno.EINVAL, f"{piece!r} would leave its directory", piece)
            out.append(piece)
    if not out:
        raise UnsafePath(errno.EINVAL, "no file named below the directory", "")
    return out


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def open_inside(base: str | os.PathLike[str], *parts: str) -> BinaryIO:
    """Open the regular file ``base/part/…`` for reading, following no link below ``base``.

    ``base`` is what the user configured (the KB root, a mapped memory home) and is followed
    as given; every component after it is opened with ``O_NOFOLLOW`` relative to the
    descriptor of the one before, so the file is inside ``base`` whatever is swapped in
    meanwhile — a link in any component is refused, never followed — and it is opened
    non-blocking and checked to be a regular file (:func:`open_regular`'s rules).

    Args:
        base: The trusted directory.
        *parts: The path below it, as components or ``/``-joined (``"documents", "x.md"``).

    Returns:
        The open file object (close it).

    Raises:
        UnsafePath: A component is a symbolic link, or ``..``.
        NotRegularFile: The file is a FIFO, a device, a socket or a directory.
        OSError: A component is missing or unreadable.
    """
    names = _parts(parts)
    shown = os.path.join(os.fspath(base), *names)
    fd = os.open(base, _DIR_FLAGS)
    try:
        for i, name in enumerate(names):
            last = i == len(names) - 1
            flags = (_READ_FLAGS if last else _DIR_FLAGS) | _NOFOLLOW
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) and _is_link(name, fd):
                    raise _link_refused(os.path.join(os.fspath(base), *names[: i + 1])) from None
                raise
            os.close(fd)
            fd = nxt
            if last:
                fd = -1  # _regular_file owns it now (and closes it if it refuses)
                return _regular_file(nxt, shown)
        raise AssertionError("unreachable")  # pragma: no cover - names is never empty
    finally:
        if fd >= 0:
            os.close(fd)


def read_inside(base: str | os.PathLike[str], *parts: str, max_bytes: int) -> bytes:
    """The bytes of ``base/part/…`` (:func:`open_inside`), refused whole when over a bound.

    Args:
        base: The trusted directory.
        *parts: The path below it.
        max_bytes: The largest file read; a larger one is not read at all.

    Returns:
        The file's content.

    Raises:
        TooLarge: The file is larger than ``max_bytes`` (nothing of it is returned).
        UnsafePath, NotRegularFile, OSError: As :func:`open_inside`.
    """
    with open_inside(base, *parts) as fh:
        return _bounded(fh, max_bytes, os.path.join(os.fspath(base), *_parts(parts)))


def read_regular(path: str | os.PathLike[str], *, max_bytes: int, follow: bool = False) -> bytes:
    """The bytes of one regular file (:func:`open_regular`), refused whole when over a bound.

    Args:
        path: The file.
        max_bytes: The largest file read.
        follow: Follow a symbolic link in the last component (default: refuse it).

    Returns:
        The file's content.

    Raises:
        TooLarge: The file is larger than ``max_bytes``.
        UnsafePath, NotRegularFile, OSError: As :func:`open_regular`.
    """
    with open_regular(path, follow=follow) as fh:
        return _bounded(fh, max_bytes, os.fspath(path))


def _bounded(fh: BinaryIO, max_bytes: int, shown: str) -> bytes:
    size = os.fstat(fh.fileno()).st_size
    if size > max_bytes:
        raise TooLarge(errno.EFBIG, f"{shown} is {size:,} bytes, over the {max_bytes:,} read")
    data = fh.read(max_bytes + 1)  # a file growing meanwhile is bounded too
    if len(data) > max_bytes:
        raise TooLarge(errno.EFBIG, f"{shown} grew past the {max_bytes:,} bytes read", shown)
    return data


def linked_part(base: str | os.PathLike[str], *parts: str) -> str | None:
    """The first of ``base/part/…`` (below ``base``) that is a symbolic link, if any.

    For directories we are about to write into or list (``documents/``, a memory home and
    its ``reflections/``): a link there would carry our writes, and ``chmod``, to wherever it
    points. Missing components are not links (they are created as real directories).

    Args:
        base: The trusted directory (not checked: the user configured it).
        *parts: The components below it.

    Returns:
        The path of the first linked component, or ``None``.
    """
    path = os.fspath(base)
    for name in _parts(parts):
        path = os.path.join(path, name)
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return path
        except OSError:
            return None
    return None


def lines_backwards(
    fh: BinaryIO, pos: int, floor: int, *, max_line: int, block: int = 64 * 1024
) -> Iterator[bytes]:
    """The complete lines ending at or before ``pos`` and starting at or after ``floor``,
    last first, read in blocks from ``pos`` back: what a transcript's newest records need
    (its context fill, its last prompts) without reading, or holding, the rest of it.

    A line longer than ``max_line`` (a pasted file, a tool's output) is skipped without being
    held, so memory stays bounded by ``block + max_line`` whatever a line's size. A line that
    crosses ``floor`` is not complete here and is not given (a tail read from a seek starts
    mid-line), except that at ``floor == 0`` the file's first line is.

    Args:
        fh: The open file (binary, seekable).
        pos: Where to read back from (the file's size for its end).
        floor: Read nothing before this offset.
        max_line: The longest line given, in bytes.
        block: How much is read at a time.

    Yields:
        Each line's bytes, without its newline, newest first (an unterminated last line
        included).
    """
    parts: list[bytes] = []  # the pieces of the line being crossed, last piece first
    held = 0
    skipping = False
    while pos > floor:
        start = max(floor, pos - block)
        fh.seek(start)
        chunk = fh.read(pos - start)
        end = len(chunk)
        cut = chunk.rfind(b"\n", 0, end)
        while cut >= 0:
            piece = chunk[cut + 1 : end]
            if not skipping and held + len(piece) <= max_line:
                yield b"".join([piece, *reversed(parts)]) if parts else piece
            parts, held, skipping = [], 0, False
            end = cut
            cut = chunk.rfind(b"\n", 0, end)
        if not skipping:
            parts.append(chunk[:end])
            held += end
            if held > max_line:
                parts, held, skipping = [], 0, True
        pos = start
    if floor == 0 and parts and not skipping:
        yield b"".join(reversed(parts))  # the file's first line
