"""The few environment lookups the hook path needs, with no imports beyond ``os``.

Kept apart from ``config`` (which builds the full validated ``Settings`` with dataclasses
and pathlib) because every millisecond of import time is paid after every agent turn.
"""

from __future__ import annotations

import os

from .markers import CHILD_ENV

TRUE = frozenset({"1", "true", "yes", "on"})


def is_truthy(raw: str | None) -> bool:
    """Whether an environment value means "on".

    Args:
        raw: The variable's value; surrounding whitespace and case are ignored. ``None``
            (unset) and every spelling outside :data:`TRUE` mean off.

    Returns:
        True for ``1``, ``true``, ``yes`` or ``on``.
    """
    return (raw or "").strip().lower() in TRUE


def home_dir_str(environ: dict[str, str] | None = None) -> str:
    """``$REFLECT_HOME`` (or the original's ``REFLECT_STATE_DIR``), default ``~/.reflect``.

    Args:
        environ: The environment to read; ``None`` means ``os.environ``. An empty
            ``REFLECT_HOME`` falls back to ``REFLECT_STATE_DIR``; a value of only
            whitespace gives the default.

    Returns:
        The state directory with ``~`` expanded. It is not created, and it is relative if
        the variable holds a relative path.
    """
    env = os.environ if environ is None else environ
    raw = (env.get("REFLECT_HOME") or env.get("REFLECT_STATE_DIR") or "").strip()
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".reflect")


def kb_root_str(environ: dict[str, str] | None = None) -> str:
    """``$GLOBAL_LEARNINGS_PATH``, default ``~/.learnings`` (what ``Settings.kb_path`` reads).

    Args:
        environ: The environment to read; ``None`` means ``os.environ``.

    Returns:
        The knowledge base's root with ``~`` expanded; not created.
    """
    env = os.environ if environ is None else environ
    raw = (env.get("GLOBAL_LEARNINGS_PATH") or "").strip()
    if raw:
        return os.path.expanduser(raw)
    home = (env.get("HOME") or "").strip() or os.path.expanduser("~")
    return os.path.join(home, ".learnings")


def memory_homes_str(environ: dict[str, str] | None = None) -> str:
    """``$REFLECT_MEMORY_HOMES``, the memory-home mapping file (``reflect_jobs/repo.py``).

    Args:
        environ: The environment to read; ``None`` means ``os.environ``.

    Returns:
        The file's path with ``~`` expanded, default ``$REFLECT_HOME/memory-homes.conf``;
        the file need not exist (no mapping).
    """
    env = os.environ if environ is None else environ
    raw = (env.get("REFLECT_MEMORY_HOMES") or "").strip()
    if raw:
        return os.path.expanduser(raw)
    return os.path.join(home_dir_str(env), "memory-homes.conf")


def queue_url(environ: dict[str, str] | None = None) -> str:
    """``$REFLECT_QUEUE_URL``, default the SQLite file ``$REFLECT_HOME/queue.db``.

    Args:
        environ: The environment to read; ``None`` means ``os.environ``.

    Returns:
        The variable's value, stripped and not validated (``config.load_settings`` checks
        the scheme), or ``sqlite:///<home>/queue.db`` when it is unset or empty.
    """
    env = os.environ if environ is None else environ
    raw = (env.get("REFLECT_QUEUE_URL") or "").strip()
    return raw if raw else "sqlite:///" + os.path.join(home_dir_str(environ), "queue.db")


def hook_disabled(environ: dict[str, str] | None = None) -> bool:
    """Whether the hook must do nothing: inside our own writer's model call, or switched off.

    Args:
        environ: The environment to read (default ``os.environ``).

    Returns:
        True when ``$REFLECT_DRAIN_CHILD`` (:data:`~reflect_jobs.markers.CHILD_ENV`) or
        ``$REFLECT_DISABLED`` is truthy. Never raises: unlike ``Settings``, a value that is
        not a boolean means "not set", so a typo cannot break an agent session.
    """
    env = os.environ if environ is None else environ
    return is_truthy(env.get(CHILD_ENV)) or is_truthy(env.get("REFLECT_DISABLED"))
