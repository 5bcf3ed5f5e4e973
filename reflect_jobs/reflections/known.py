"""Which repositories this machine has reflection logs for, each with its memory home.

Split from :mod:`.store` (one repository's store): the walk over the default memory homes
(``<kb>/repos/<name>/reflections``) and the homes the index has read, with the lazy
labelling of a home written before labels existed (ARCHITECTURE §13). Read by
``reflections list --all``, the dedupe pass, the background refresh and the dashboard.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from reflect_jobs.repo import Repo, is_home_name
from reflect_jobs.repo_home import read_key_file, record_key

from .index import ReflectionIndex


def _learned_keys(kb: Path) -> list[str]:
    """The repository keys of the KB's repository-scoped learnings (its context store)."""
    from reflect_jobs.recall import store as context

    try:
        conn = context.open_for_read(context.store_path(kb))
        if conn is None:
            return []
        try:
            rows = conn.execute("SELECT DISTINCT repo_key FROM notes WHERE scope = 'repo'")
            return [r[0] for r in rows if isinstance(r[0], str) and r[0]]
        finally:
            conn.close()
    except sqlite3.Error:
        return []


def _listed(key: str, home: Path) -> Repo:
    """A listed repository; a key that is only its home's directory name stays just that."""
    style = "name" if key == home.name and is_home_name(key) else "key"
    return Repo(key, None, home, style=style)


def known_repos(index: ReflectionIndex, kb: Path) -> list[Repo]:
    """Every repository with logs, one per log directory, each with its memory home.

    The default memory homes (``<kb>/repos/<name>/reflections``) and any home the index has
    read (a mapped one). A default home is known by its label (``repo-key``); a home
    written before labels existed takes the key the index learned for it from its
    repository, else the key of a learning whose directory name it is, and is labelled
    then (the lazy migration: idempotent, and each label is written whole). Only a home
    none of these knows keeps its directory name as its key; the index's rows under such a
    name are dropped once the home is known by its key.

    Args:
        index: This machine's index.
        kb: The knowledge base (``$GLOBAL_LEARNINGS_PATH``).

    Returns:
        The repositories, sorted by key.
    """
    indexed = index.log_dirs()
    found: dict[str, Repo] = {}  # by the real path of the log directory
    unlabelled: list[Path] = []
    repos_dir = kb / "repos"
    if repos_dir.is_dir() and not repos_dir.is_symlink():
        for d in sorted(repos_dir.iterdir()):
            if not ((d / "reflections").is_dir() and is_home_name(d.name)):
                continue
            if d.is_symlink() or (d / "reflections").is_symlink():
                continue  # never followed (repo_home.memory_home refuses it with one line)
            key = read_key_file(d, d.name)
            if key is None:
                unlabelled.append(d)
            found[os.path.realpath(d / "reflections")] = _listed(key or d.name, d)
    if unlabelled:
        names = {d.name for d in unlabelled}
        learned: dict[str, str] = {}
        for key in [k for k in indexed if k not in names] + _learned_keys(kb):
            for name in Repo(key).names:
                learned.setdefault(name, key)
        for d in unlabelled:
            if d.name in learned:
                repo = Repo(learned[d.name], None, d)
                found[os.path.realpath(d / "reflections")] = repo
                record_key(repo)
    for key, log_dir in indexed.items():
        real = os.path.realpath(log_dir)
        if real not in found:
            found[real] = _listed(key, log_dir.parent)
        elif found[real].key != key and key == log_dir.parent.name:
            index.forget(key)  # rows under a bare directory name, now known by its key
    by_key: dict[str, Repo] = {}
    for repo in found.values():
        by_key.setdefault(repo.key, repo)
    return [by_key[k] for k in sorted(by_key)]
