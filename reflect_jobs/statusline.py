"""``reflect-jobs statusline``: the repository's open items at a glance (seed 002), fast.

Claude Code runs its ``statusLine`` command after every message with a JSON payload on
stdin (``workspace.current_dir``, ``cwd``, …) and shows the first line it prints. This prints
one short segment for the repository of that directory — ``2 open · 1 handoff`` — and
nothing outside a repository or one whose store was never used.

It runs often, so it must cost about an interpreter start-up (``bench/bench_statusline.py``:
median ≤ 2.5× a bare interpreter). Standard library only, and imported by the console
script's tiny dispatcher (``reflect_jobs/entry.py``) without click or the package's heavy
modules. The answer comes from a small cache file, ``$REFLECT_HOME/statusline.json``:

* an entry per repository root: its log directory, the ``(size, mtime_ns, inode)`` of each
  host log when the counts were taken, the counts, and when;
* an entry is *fresh* while the logs stat the same (one ``scandir`` of the log directory)
  and it is younger than :data:`TTL_SEC` (staleness is derived from time, so a count goes
  out of date without any log changing);
* otherwise the counts are taken again the way the session-start hook reads items
  (``recall/items.py``: the index read-only, a small change indexed within its budget, a
  big one left to the worker) and the entry rewritten (atomically, 0600);
* the worker's periodic ``refresh_reflections`` task refreshes every entry
  (:func:`refresh_cache`), so a status line usually finds its entry fresh.

``reflect-jobs status --line`` reads the same cache (:func:`counts_for`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

#: A cached count is taken again after this long even when no log changed (stale items).
TTL_SEC = 120
#: The most repositories the cache keeps (the least recently counted go first).
MAX_ENTRIES = 200
#: The most of stdin read (Claude Code's payload is a few hundred bytes).
MAX_STDIN = 64 * 1024
CACHE_NAME = "statusline.json"


def payload_dir(raw: bytes) -> str | None:
    """The directory a statusLine payload names: ``workspace.current_dir``, else ``cwd``.

    Args:
        raw: stdin's bytes (anything: a bad payload names no directory).

    Returns:
        The directory, or None.
    """
    try:
        data = json.loads(raw.decode("utf-8", errors="replace")) if raw.strip() else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    workspace = data.get("workspace")
    current = workspace.get("current_dir") if isinstance(workspace, dict) else None
    for value in (current, data.get("cwd")):
        if isinstance(value, str) and value.strip():
            return value
    return None


def segment(counts: dict[str, Any] | None) -> str:
    """The status-line text for a repository's counts.

    Args:
        counts: ``{"open", "handoffs", "store"}`` (open counts every open, not stale item,
            handoffs included); None outside a repository.

    Returns:
        ``"2 open · 1 handoff"`` (the handoff part only when there is one); ``""`` for None
        or a repository whose store holds no log yet.
    """
    if not counts or not counts.get("store", True):
        return ""
    text = f"{int(counts.get('open', 0))} open"
    handoffs = int(counts.get("handoffs", 0))
    if handoffs:
        text += f" · {handoffs} handoff{'s' if handoffs != 1 else ''}"
    return text


def _cache_path(env: dict[str, str]) -> str:
    from reflect_jobs.envpaths import home_dir_str

    return os.path.join(home_dir_str(env), CACHE_NAME)


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(4 * 1024 * 1024))
    except (OSError, ValueError, RecursionError):
        return {}
    repos = data.get("repos") if isinstance(data, dict) else None
    return repos if isinstance(repos, dict) else {}


def _save(path: str, repos: dict[str, Any]) -> None:
    """Write the cache atomically (temp file, rename), 0600; a failure is silent."""
    if len(repos) > MAX_ENTRIES:
        keep = sorted(repos.items(), key=lambda kv: kv[1].get("at", 0), reverse=True)
        repos = dict(keep[:MAX_ENTRIES])
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"v": 1, "repos": repos}, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _logs_now(log_dir: str) -> dict[str, list[int]]:
    from reflect_jobs.reflections.logscan import scan_logs

    return {p: list(s) for p, s in scan_logs(log_dir).items()}


def _fresh(entry: Any, now: float) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("log_dir"), str):
        return False
    at = entry.get("at")
    if not isinstance(at, (int, float)) or not 0 <= now - at < TTL_SEC:
        return False
    return _logs_now(entry["log_dir"]) == entry.get("logs")


def _count(root: str, env: dict[str, str]) -> dict[str, Any] | None:
    """Take the counts as the session-start hook reads items (``recall/items.py``).

    Returns:
        The cache entry: ``open``, ``handoffs``, ``store`` (the repository has logs),
        ``log_dir`` and ``logs`` (the scan the counts were read against; absent when no
        memory home can exist yet, so the entry is taken again each time); None when the
        counts cannot be read.
    """
    from reflect_jobs.recall.items import open_items

    counts: dict[str, Any] = {}
    try:
        _key, _items, total = open_items(root, env, limit=0, counts=counts)
    except Exception:  # noqa: BLE001 - a bad mapping file or a locked index: no segment
        return None
    logs = {p: list(s) for p, s in counts.get("logs", {}).items()}
    entry: dict[str, Any] = {
        "open": total,
        "handoffs": int(counts.get("handoffs", 0)),
        "store": bool(logs),
    }
    if isinstance(counts.get("log_dir"), str):
        entry.update(log_dir=counts["log_dir"], logs=logs)
    return entry


def counts_for(cwd: str, environ: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The open and handoff counts of the repository holding ``cwd``, from the cache.

    Args:
        cwd: A directory.
        environ: The environment (``None``: ``os.environ``, merged with the config file).

    Returns:
        ``{"open", "handoffs", "store"}`` (``store``: the repository has logs); None outside
        a git repository or when the counts cannot be read.
    """
    from reflect_jobs.envpaths import environ as merged
    from reflect_jobs.git_files import git_root

    root = git_root(os.path.abspath(cwd))
    if root is None:
        return None
    env = merged(environ)
    path = _cache_path(env)
    repos = _load(path)
    now = time.time()
    entry = repos.get(root)
    if entry is None or not _fresh(entry, now):
        entry = _count(root, env)
        if entry is None:
            return None
        entry["at"] = now
        repos[root] = entry
        _save(path, repos)
    return {
        "open": int(entry.get("open", 0)),
        "handoffs": int(entry.get("handoffs", 0)),
        "store": bool(entry.get("store")),
    }


def refresh_cache(environ: dict[str, str] | None = None, *, budget_sec: float = 5.0) -> int:
    """Take again every cached entry whose logs changed or whose time ran out (the worker).

    Args:
        environ: The environment.
        budget_sec: Seconds of work at most.

    Returns:
        How many entries were taken again.
    """
    from reflect_jobs.envpaths import environ as merged

    env = merged(environ)
    path = _cache_path(env)
    repos = _load(path)
    if not repos:
        return 0
    deadline = time.monotonic() + budget_sec
    now = time.time()
    done = 0
    for root, entry in list(repos.items()):
        if time.monotonic() >= deadline:
            break
        if not isinstance(entry, dict) or "log_dir" not in entry or _fresh(entry, now):
            continue
        if not os.path.isdir(root):
            del repos[root]
            continue
        fresh = _count(root, env)
        if fresh is not None:
            fresh["at"] = time.time()
            repos[root] = fresh
            done += 1
    _save(path, repos)
    return done


def main(argv: list[str] | None = None) -> int:
    """Read the statusLine payload on stdin, print the segment; never fails the status line.

    Args:
        argv: Arguments after ``statusline`` (``--cwd DIR`` reads that directory instead
            of stdin; ``-h``/``--help`` prints usage).

    Returns:
        0, always (a status line must not show an error for us).
    """
    args = list(sys.argv[2:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print("usage: reflect-jobs statusline [--cwd DIR] < statusLine JSON on stdin")
        print("Prints the current repository's open items, e.g. '2 open · 1 handoff'.")
        return 0
    where: str | None = None
    if args[:1] == ["--cwd"] and len(args) > 1:
        where = args[1]
    else:
        try:
            raw = (
                b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read(MAX_STDIN)
            )
        except (OSError, ValueError):
            raw = b""
        where = payload_dir(raw) or os.getcwd()
    try:
        text = segment(counts_for(where))
    except Exception:  # noqa: BLE001 - never an error in a status line
        text = ""
    if text:
        sys.stdout.write(text + "\n")
    return 0
