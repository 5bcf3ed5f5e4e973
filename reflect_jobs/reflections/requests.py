"""Refresh requests: what a reader that must not index leaves for the worker (stdlib only).

The session-start hook and ``status --line`` read the last committed reflection index and
never index a big change themselves (ARCHITECTURE §14). When the logs they stat differ from
the index beyond their small budget, they leave a request here — one small file per
repository, ``$REFLECT_HOME/reflections-refresh/<hash>.json`` holding the repo key and its
log directory — and the worker's periodic refresh (``tasks.refresh_reflections``) brings the
index up to date, including a memory home the index has never read (a mapped one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os

DIR = "reflections-refresh"

__all__ = ["DIR", "clear_request", "pending_requests", "request_refresh"]


def _path(reflect_home: str, log_dir: str) -> str:
    digest = hashlib.sha256(os.fsencode(log_dir)).hexdigest()[:24]
    return os.path.join(reflect_home, DIR, digest + ".json")


def request_refresh(reflect_home: str, key: str, log_dir: str) -> None:
    """Ask the worker to refresh ``key`` (idempotent; a failure to ask is not an error).

    Args:
        reflect_home: ``$REFLECT_HOME``.
        key: The repo key.
        log_dir: Its ``<memory home>/reflections`` directory.
    """
    path = _path(reflect_home, log_dir)
    if os.path.exists(path):
        return
    data = json.dumps({"repo": key, "log_dir": log_dir}).encode()
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def pending_requests(reflect_home: str) -> dict[str, str]:
    """The repositories whose refresh was requested and not yet done.

    Args:
        reflect_home: ``$REFLECT_HOME``.

    Returns:
        ``repo key -> log directory`` (unreadable request files are skipped).
    """
    out: dict[str, str] = {}
    folder = os.path.join(reflect_home, DIR)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as fh:
                data = json.loads(fh.read(4096))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            key, log_dir = data.get("repo"), data.get("log_dir")
            if isinstance(key, str) and isinstance(log_dir, str):
                out[key] = log_dir
    return out


def clear_request(reflect_home: str, log_dir: str) -> None:
    """Forget the request for ``log_dir`` (its refresh completed).

    Args:
        reflect_home: ``$REFLECT_HOME``.
        log_dir: The log directory the request named.
    """
    with contextlib.suppress(OSError):
        os.unlink(_path(reflect_home, log_dir))
