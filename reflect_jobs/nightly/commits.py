"""Commits a session made, and reverts of them in a repository's recent history.

A session's commits are read from the transcript's raw bytes (``prepare`` calls
:func:`session_commits` on the part of the transcript its pass reads): ``git commit`` prints
``[<branch> <short id>] <subject>`` (``[main (root-commit) 4f2a9c1] …`` for a first commit) at
the start of its output, which the transcript holds as a JSON string (after a ``"`` or an
escaped newline). Only that shape counts, so prose mentioning a hash does not.

The reverts are read with one bounded ``git log`` (``-n`` and ``--since``, run by
:mod:`reflect_jobs.children` with a timeout): a 100,000-commit history costs what its last
:data:`LOG_MAX_COMMITS` commits cost.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime

from reflect_jobs import children
from reflect_jobs.fsio import open_regular

#: ``[main 4f2a9c1] subject`` at the start of a line (raw, after ``"``, or an escaped \\n).
_COMMIT_LINE = re.compile(
    rb'(?:^|\n|"|\\n)\[(?:[^\s\[\]"\\]{1,200}) (?:\(root-commit\) )?([0-9a-f]{7,40})\] '
)
_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
CHUNK = 1 << 20
MAX_COMMITS_PER_PASS = 100
LOG_MAX_COMMITS = 2000
LOG_TIMEOUT_SEC = 30.0
_SEP, _END = "\x1f", "\x1e"

__all__ = ["Revert", "reverts", "session_commits"]


def session_commits(path: str | os.PathLike[str], since: int = 0) -> list[str]:
    """The short ids of the commits a session's tool output shows it created.

    Args:
        path: The transcript (a FIFO or a link's target is refused by ``open_regular``).
        since: The byte offset this pass reads from (the session's watermark).

    Returns:
        Distinct lower-case ids in order of appearance, at most
        :data:`MAX_COMMITS_PER_PASS`; empty when the file cannot be read.
    """
    found: dict[str, None] = {}
    try:
        with open_regular(path) as fh:
            fh.seek(max(0, since))
            tail = b""
            while len(found) < MAX_COMMITS_PER_PASS:
                chunk = fh.read(CHUNK)
                if not chunk:
                    break
                data = tail + chunk
                for m in _COMMIT_LINE.finditer(data):
                    found.setdefault(m.group(1).decode(), None)
                tail = data[-300:]  # a match cut by the chunk boundary is seen next time
    except OSError:
        return []
    return list(found)[:MAX_COMMITS_PER_PASS]


@dataclass(frozen=True)
class Revert:
    """One reverting commit: its id and the id it reverts (as its message names it)."""

    commit: str
    reverted: str


def reverts(root: str, since: datetime, *, max_commits: int = LOG_MAX_COMMITS) -> list[Revert]:
    """The reverts in a repository's history since ``since``, newest first, bounded.

    Args:
        root: The repository's working tree.
        since: Only commits after this (``git log --since``).
        max_commits: At most this many commits are read (``git log -n``).

    Returns:
        The reverts found.

    Raises:
        OSError: ``git`` could not be started, or it failed (not a repository, a timeout):
            the message says which.
    """
    done = children.run(
        [
            "git",
            "-C",
            root,
            "log",
            f"-n{max_commits}",
            f"--since={since.isoformat()}",
            f"--format=%H{_SEP}%B{_END}",
        ],
        timeout=LOG_TIMEOUT_SEC,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
    )
    if done.timed_out:
        raise OSError(f"git log timed out after {LOG_TIMEOUT_SEC:.0f} s in {root}")
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise OSError(f"git log failed in {root}: {err[0] if err else done.returncode}")
    out: list[Revert] = []
    for record in done.stdout.decode(errors="replace").split(_END):
        commit, _, body = record.strip().partition(_SEP)
        for m in _REVERTS.finditer(body):
            out.append(Revert(commit.strip(), m.group(1)))
    return out
