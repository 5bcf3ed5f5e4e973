"""The stat scan of a repository's host logs: what the index compares to decide "unchanged".

Standard library only and import-light: the session-start hook (``recall/items.py``) runs the
same scan as the index's refresh (``index.py``) to tell whether it may read the index as it
is, and both must see the logs the same way.
"""

from __future__ import annotations

import contextlib
import os


def scan_logs(log_dir: os.PathLike[str] | str) -> dict[str, tuple[int, int, int]]:
    """``{path: (size, mtime_ns, inode)}`` of every host log (``*.jsonl``, not hidden).

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
                        st = entry.stat()
                        found[entry.path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found
