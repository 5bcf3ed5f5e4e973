"""Which repository a transcript's learnings belong to (worker side, ARCHITECTURE §13)."""

from __future__ import annotations

import os

from reflect_jobs.repo import MAX_KEY_CHARS, repo_for
from reflect_jobs.transcripts.cwd import transcript_cwd


def transcript_repo(path: str | os.PathLike[str]) -> dict[str, str | None] | None:
    """The repository of the directory a transcript was recorded in.

    Args:
        path: The transcript file.

    Returns:
        ``{"key", "root", "cwd"}`` (see :func:`reflect_jobs.repo.repo_for`); when
        the directory is gone and no repository encloses what remains, the recorded path
        itself is the key (what the hook computes for a directory outside git), with
        ``root`` ``None``. ``None`` when the transcript names no working directory.
    """
    cwd = transcript_cwd(path)
    if not cwd:
        return None
    ref = repo_for(cwd)
    if ref is None:
        return {"key": os.path.normpath(cwd)[:MAX_KEY_CHARS], "root": None, "cwd": cwd}
    return {"key": ref.key, "root": ref.root, "cwd": cwd}
