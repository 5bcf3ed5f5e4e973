"""The Huey instance: the transport, never the truth (ARCHITECTURE §1).

SqliteHuey on ``$REFLECT_HOME/queue.db`` by default, RedisHuey for ``redis://`` URLs. The
same instance's storage also holds the rate-limit counters (``limits``), so in a shared
deployment every consumer on every machine counts against one budget.
"""

from __future__ import annotations

from pathlib import Path

from huey import RedisHuey, SqliteHuey
from huey.api import Huey

from reflect_jobs.perms import private_dir, private_file

from .config import Settings
from .fastqueue import QUEUE_NAME


def make_huey(settings: Settings) -> Huey:
    """Build the queue for ``settings`` (results are not stored: the ledger has them).

    Args:
        settings: Supplies ``queue_url``. A Redis URL gives a ``RedisHuey``; anything else
            is taken as ``sqlite:///PATH`` and gives a ``SqliteHuey`` on PATH, whose
            directory is created (30 s lock timeout, no fsync per write).

    Returns:
        The Huey instance named ``reflect`` (the queue the hook's fast path writes to),
        with UTC timestamps.
    """
    if settings.queue_is_redis:
        return RedisHuey(QUEUE_NAME, url=settings.queue_url, results=False, utc=True)
    path = Path(settings.queue_url[len("sqlite:///") :])
    private_dir(path.parent)
    private_file(path)  # 0600 before SQLite opens it: its -wal/-shm copy the mode
    return SqliteHuey(
        QUEUE_NAME, filename=str(path), results=False, utc=True, timeout=30, fsync=False
    )
