"""The stat scan of a repository's host logs, and the bounded line reader of one log.

Standard library only and import-light: the session-start hook (``recall/items.py``) runs the
same scan as the index's refresh (``index.py``) to tell whether it may read the index as it
is, and both must see the logs the same way. :func:`iter_lines` is how the index reads a log:
streamed, never holding a line over the bound. :func:`leads_sql` (and :func:`leads`, the same
test on an item read back) is the one rule for which open items lead the session-start list
(both readers order by it) and may name a fresh session's task (``recall/task_query.py``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO


def scan_logs(log_dir: os.PathLike[str] | str) -> dict[str, tuple[int, int, int]]:
    """``{path: (size, mtime_ns, inode)}`` of every host log (``*.jsonl``, not hidden).

    Only regular files count: a "log" that is a symbolic link (a synced home can carry
    one, pointing at a private file) or a FIFO is never listed, so never read.

    Args:
        log_dir: A memory home's ``reflections/`` directory.

    Returns:
        The logs found; empty when the directory does not exist. A log that vanishes
        between listing and stat is left out.
    """
    found: dict[str, tuple[int, int, int]] = {}
    try:
        with os.scandir(log_dir) as entries:
            for entry in entries:
                if entry.name.endswith(".jsonl") and not entry.name.startswith("."):
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            found[entry.path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found


#: Bytes read per step when streaming a log.
READ_BLOCK = 1 << 20


def iter_lines(
    fh: BinaryIO, start: int, end: int, limit: int
) -> Iterator[tuple[bytes | None, int]]:
    """Stream the complete lines of ``fh`` between ``start`` and ``end``, bounded.

    A line is never held beyond ``limit`` bytes: a longer one is read past (not kept) and
    yielded as ``None``, so a log with a 100 MB line costs a read, not 100 MB of memory. A
    last line without its newline is not yielded (a writer may be in the middle of it).

    Args:
        fh: The log, opened binary.
        start: The offset to start at (the start of a line).
        end: Read no further than this (the size the caller stat'ed).
        limit: The longest line kept, newline included.

    Yields:
        ``(line, offset)``: the line without its newline (``None`` when it was over
        ``limit``) and the offset just past it.
    """
    fd = fh.fileno()
    pos = start
    pending: list[bytes] = []
    held = 0
    skipping = False
    while pos < end:
        chunk = os.pread(fd, min(READ_BLOCK, end - pos), pos)  # no shared file position
        if not chunk:
            return
        i = 0
        while True:
            j = chunk.find(b"\n", i)
            if j < 0:
                break
            offset = pos + j + 1
            if skipping or held + (j - i) + 1 > limit:
                yield None, offset
            else:
                piece = chunk[i:j]
                yield (b"".join([*pending, piece]) if pending else piece), offset
            pending, held, skipping = [], 0, False
            i = j + 1
        rest = len(chunk) - i
        if rest and not skipping:
            if held + rest > limit:
                pending, held, skipping = [], 0, True
            else:
                pending.append(chunk[i:])
                held += rest
        pos += len(chunk)


#: Who may put a handoff at the head of the open items: a person, or a skill (``/handoff``,
#: MCP ``add_item``). A model's — the reflector's — handoff is listed by age among the rest.
LEAD_AUTHORS = ("person", "skill")


def leads_sql(alias: str = "") -> str:
    """The SQL condition of an item that leads the open list (issue 24: no takeover).

    "Handoffs first" lets one item jump every other; a reflector fooled by what its session
    read could write a handoff that pushes an honest one down. Only a handoff a person or a
    skill wrote leads; every other item is ordered newest first after them.

    Args:
        alias: The ``items`` table's alias with its dot (``"s."``), or ``""``.

    Returns:
        A condition that is never NULL (so ``NOT (...)`` selects exactly the rest).
    """
    authors = ", ".join(f"'{a}'" for a in LEAD_AUTHORS)
    return f"IFNULL({alias}kind, '') = 'handoff' AND IFNULL({alias}by, '') IN ({authors})"


def leads(item: dict) -> bool:
    """Whether an item read back (``{"kind", "by", …}``) leads: :func:`leads_sql` in Python.

    Args:
        item: An open item as the readers return it.

    Returns:
        True for a handoff a person or a skill wrote.
    """
    return item.get("kind") == "handoff" and item.get("by") in LEAD_AUTHORS
