"""What one session was told: the ids kept per session under the home (stdlib only).

Per-prompt recall never tells a learning the session already has in its context: the
session-start block's or an earlier prompt's (issue 25). One small JSON file per session,
named by sha256 of harness and session id, 0600 in a 0700 directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

#: The told ids kept per session, and how long a session's file lives.
TOLD_MAX = 400
TOLD_TTL_SEC = 7 * 86400.0


class SessionTold:
    """The ids one session was told, kept under the home (0600 files in 0700 directories).

    SessionStart replaces the set with what its block told (the agent's context now holds
    exactly that block, also after a compaction or ``/clear``); each prompt adds what it
    told. A file older than :data:`TOLD_TTL_SEC` is ignored and removed by the next writer
    that finds it while pruning.
    """

    def __init__(self, home: str, harness: str, session_id: object) -> None:
        """Locate the session's file (nothing is read or written yet).

        Args:
            home: ``$REFLECT_HOME``.
            harness: The harness (sessions of two harnesses never share a set).
            session_id: The payload's session id; without one nothing is remembered.
        """
        sid = str(session_id or "")
        self.enabled = bool(sid)
        digest = hashlib.sha256(f"{harness}\0{sid}".encode("utf-8", "surrogateescape")).hexdigest()
        self.dir = os.path.join(home, "recall", "told")
        self.path = os.path.join(self.dir, digest[:32] + ".json")

    def read(self) -> set[str]:
        """The ids told so far.

        Returns:
            The set (empty when the session is unknown, the file unreadable or expired).
        """
        if not self.enabled:
            return set()
        from reflect_jobs.fsio import open_regular

        try:
            with open_regular(self.path, follow=False) as fh:
                if time.time() - os.fstat(fh.fileno()).st_mtime > TOLD_TTL_SEC:
                    return set()
                data = json.loads(fh.read(64 * 1024).decode("utf-8", "replace"))
        except (OSError, ValueError):
            return set()
        ids = data.get("ids") if isinstance(data, dict) else None
        return {str(x) for x in ids} if isinstance(ids, list) else set()

    def write(self, ids: list[str], *, replace: bool = False) -> None:
        """Record ``ids`` as told; a failure is logged, never raised (the answer is out).

        Args:
            ids: The ids told now.
            replace: Replace the set (a session start) instead of adding to it.
        """
        if not self.enabled:
            return
        keep = list(dict.fromkeys([*([] if replace else sorted(self.read())), *ids]))[-TOLD_MAX:]
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"ids": keep}, fh)
            os.replace(tmp, self.path)
            if replace:
                self._prune()
        except OSError as exc:
            from reflect_jobs.hook_log import log_error

            log_error(f"recall told-set: {type(exc).__name__}: {exc}")

    def _prune(self, budget: int = 200) -> None:
        """Remove expired session files: a bounded look at most ``budget`` entries, at most
        once an hour (one ``stat`` of the directory's marker says when it last ran)."""
        now = time.time()
        mark = os.path.join(self.dir, ".pruned")
        try:
            if now - os.stat(mark).st_mtime < 3600:
                return
        except OSError:
            pass
        try:
            os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            os.utime(mark)
            with os.scandir(self.dir) as it:
                for n, entry in enumerate(it):
                    if n >= budget:
                        break
                    try:
                        if now - entry.stat(follow_symlinks=False).st_mtime > TOLD_TTL_SEC:
                            os.unlink(entry.path)
                    except OSError:
                        continue
        except OSError:
            return
