"""The stat scan of a repository's host logs: what the index compares to decide "unchanged".

Standard library only and import-light: the session-start hook (``recall/items.py``) runs the
same scan as the index's refresh (``index.py``) to tell whether it may read the index as it
is, and both must see the logs the same way.
"""

from __future__ import annotations

import contextlib
import os
import stat


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
