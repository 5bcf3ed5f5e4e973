"""The few environment lookups the hook needs, with no imports beyond ``os``.

Kept apart from ``config`` (which builds the full validated ``Settings`` with dataclasses
and pathlib) because every millisecond of import time is paid after every agent turn.
"""

from __future__ import annotations

import os

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
