"""The few setting lookups the hook path needs, with no imports beyond ``os`` and ``json``.

Kept apart from ``config`` (which builds the full validated ``Settings`` with dataclasses
and pathlib) because every millisecond of import time is paid after every agent turn. The
names and defaults are those of :mod:`reflect_jobs.settings_spec`, and every lookup sees the
user config file under the environment (:func:`environ`), exactly as ``Settings`` does — so
a hook run with the harness's bare environment uses the home ``install`` recorded.
"""

from __future__ import annotations

import os

from .markers import CHILD_ENV

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Mapping

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


def environ(given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with the user config file under it (``userconfig.overlay``).

    Every setting lookup goes through this: the hook, ``Settings`` and the reflection store
    read one merged view. A variable set (not blank) in the environment wins.

    Args:
        given: The environment to start from; ``None`` means ``os.environ``. Not modified;
            merging an already merged environment changes nothing.

    Returns:
        A new dict.
    """
    from .userconfig import overlay

    return overlay(given)


def get(name: str, given: Mapping[str, str] | None = None) -> str:
    """One variable's value, config file included; ``""`` when neither sets it.

    Args:
        name: The variable (``REFLECT_RECALL_ON_PROMPT``…).
        given: The environment (default ``os.environ``).

    Returns:
        The value, stripped.
    """
    return (environ(given).get(name) or "").strip()


def home_dir_str(given: Mapping[str, str] | None = None) -> str:
    """``$REFLECT_HOME`` (or the deprecated ``REFLECT_STATE_DIR``), default ``~/.reflect``.

    Args:
        given: The environment to read; ``None`` means ``os.environ``. An empty
            ``REFLECT_HOME`` falls back to the config file's ``home``, then to
            ``REFLECT_STATE_DIR``; a value of only whitespace gives the default.

    Returns:
        The state directory with ``~`` expanded (``$HOME/.reflect`` by default, the
        environment's ``HOME``). It is not created, and it is relative if the variable holds a
        relative path.
    """
    env = environ(given)
    raw = (env.get("REFLECT_HOME") or env.get("REFLECT_STATE_DIR") or "").strip()
    if raw:
        return os.path.expanduser(raw)
    home = (env.get("HOME") or "").strip() or os.path.expanduser("~")
    return os.path.join(home, ".reflect")


def kb_root_str(given: Mapping[str, str] | None = None) -> str:
    """``$GLOBAL_LEARNINGS_PATH`` (config file ``kb_path``), default ``~/.learnings``.

    Args:
        given: The environment to read; ``None`` means ``os.environ``.

    Returns:
        The knowledge base's root with ``~`` expanded; not created.
    """
    env = environ(given)
    raw = (env.get("GLOBAL_LEARNINGS_PATH") or "").strip()
    if raw:
        return os.path.expanduser(raw)
    home = (env.get("HOME") or "").strip() or os.path.expanduser("~")
    return os.path.join(home, ".learnings")


def memory_homes_str(given: Mapping[str, str] | None = None) -> str:
    """``$REFLECT_MEMORY_HOMES`` (config file ``memory_homes``), the memory-home mapping file
    (``reflect_jobs/repo_home.py``).

    Args:
        given: The environment to read; ``None`` means ``os.environ``.

    Returns:
        The file's path with ``~`` expanded, default ``$REFLECT_HOME/memory-homes.conf``;
        the file need not exist (no mapping).
    """
    env = environ(given)
    raw = (env.get("REFLECT_MEMORY_HOMES") or "").strip()
    if raw:
        return os.path.expanduser(raw)
    return os.path.join(home_dir_str(env), "memory-homes.conf")


def queue_url(given: Mapping[str, str] | None = None) -> str:
    """``$REFLECT_QUEUE_URL``, default the SQLite file ``$REFLECT_HOME/queue.db``.

    Args:
        given: The environment to read; ``None`` means ``os.environ``.

    Returns:
        The variable's value, stripped and not validated (``config.load_settings`` checks
        the scheme), or ``sqlite:///<home>/queue.db`` when it is unset or empty.
    """
    env = environ(given)
    raw = (env.get("REFLECT_QUEUE_URL") or "").strip()
    return raw if raw else "sqlite:///" + os.path.join(home_dir_str(env), "queue.db")


def hook_disabled(given: Mapping[str, str] | None = None) -> bool:
    """Whether the hook must do nothing: inside our own writer's model call, or switched off.

    Args:
        given: The environment to read (default ``os.environ``).

    Returns:
        True when ``$REFLECT_DRAIN_CHILD`` (:data:`~reflect_jobs.markers.CHILD_ENV`) or
        ``$REFLECT_DISABLED`` (or the config file's ``disabled``) is truthy. Never raises:
        unlike ``Settings``, a value that is not a boolean means "not set", so a typo cannot
        break an agent session.
    """
    raw = os.environ if given is None else given
    if is_truthy(raw.get(CHILD_ENV)):
        return True
    return is_truthy(environ(given).get("REFLECT_DISABLED"))
