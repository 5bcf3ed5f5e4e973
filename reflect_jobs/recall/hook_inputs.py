"""What both recall blocks read besides the context store, each failing soft (stdlib only).

The SessionStart block (:mod:`.session_start`) and the per-prompt block (:mod:`.prompt_hook`)
share three reads: whether the user ignores the repository (``reflect-jobs ignore``), its
open reflection items, and its profile terms. Items and profile are aids: a failure there is
logged to ``hook-errors.log`` and the block is built without them. Nothing is imported at
module load: the names a read needs are imported when it runs, so the hook path stays light.
"""

from __future__ import annotations


def log(message: str) -> None:
    """Append one problem to ``hook-errors.log`` (the hook never raises for an aid).

    Args:
        message: The line to log.
    """
    from reflect_jobs.hook_log import log_error

    log_error(message)


def is_ignored(ref: object) -> bool:
    """Whether the user asked never to tell (nor capture) this repository.

    Args:
        ref: A :class:`reflect_jobs.repo.Repo`, or ``None``.

    Returns:
        True when the config file's ``ignore`` list names it (``reflect_jobs.repo.listed``).
    """
    if ref is None:
        return False
    from reflect_jobs.repo import listed
    from reflect_jobs.userconfig import ignored

    entries = ignored()
    return bool(entries) and listed(ref, entries)  # type: ignore[arg-type]


def open_items_for(cwd: object, kb_root: str | None) -> tuple[list[dict], int]:
    """The repository's open reflection items for the block; a failure there only logs.

    The items are a second source beside the context store: a bad memory-home mapping or a
    locked reflection index must not cost the session its learnings, so the problem goes to
    ``hook-errors.log`` and the block is built without items. The default memory homes live
    under the same KB root as the learnings (``kb_root``, when given).

    Args:
        cwd: The session's working directory.
        kb_root: The KB root (``None``: ``$GLOBAL_LEARNINGS_PATH``).

    Returns:
        ``(the items to tell, how many are open)``; ``([], 0)`` after a failure.
    """
    from reflect_jobs.envpaths import environ as merged_environ

    from . import items

    env = merged_environ()
    if kb_root:
        env["GLOBAL_LEARNINGS_PATH"] = str(kb_root)
    try:
        _, found, total = items.open_items(cwd, env)
    except Exception as exc:  # noqa: BLE001 - logged; the learnings are still told
        from reflect_jobs.hook_log import log_error

        log_error(f"open items: {type(exc).__name__}: {exc}")
        return [], 0
    return found, total


def repo_profile(ref: object, home: str | None = None) -> dict:
    """The repository's cached profile; a failure reading it only logs (no general rules).

    Args:
        ref: A :class:`reflect_jobs.repo.Repo`, or ``None`` (the empty profile).
        home: ``$REFLECT_HOME`` (default: from the environment).

    Returns:
        :func:`reflect_jobs.recall.profile.profile`; ``{}`` after a failure.
    """
    from . import profile

    root = getattr(ref, "root", None)
    try:
        return profile.profile(root, home)
    except Exception as exc:  # noqa: BLE001 - a profile is an aid; the session goes on
        log(f"repository profile: {type(exc).__name__}: {exc}")
        return {}


def repo_profile_terms(ref: object, home: str | None = None) -> list[str]:
    """The repository's profile terms; a failure reading it only logs (no general rules).

    Args:
        ref: A :class:`reflect_jobs.repo.Repo`, or ``None`` (the empty profile).
        home: ``$REFLECT_HOME`` (default: from the environment).

    Returns:
        :func:`reflect_jobs.recall.profile.profile_terms` of its cached profile; ``[]``
        after a failure.
    """
    from . import profile

    return profile.profile_terms(repo_profile(ref, home))
