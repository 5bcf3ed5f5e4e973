"""The Huey instance: the transport, never the truth (ARCHITECTURE §1).

SqliteHuey on ``$REFLECT_HOME/queue.db`` by default, RedisHuey for ``redis://`` URLs. The
same instance's storage also holds the rate-limit counters (``limits``), so in a shared
deployment every consumer on every machine counts against one budget.

A garbled SQLite queue file made every worker start fail within two seconds — a crash loop
under the service unit — although nothing in it is the truth. So a consumer start
(:func:`make_huey` with ``repair=True``) moves a damaged file aside
(``queue.db.garbled-<UTC time>``) and starts an empty one; the caller records it
(:data:`REPAIRS`) in the errors ledger, reseeds the caps from the ledger, and recovery
re-sends every due job and spooled capture, so nothing is lost.
"""

from __future__ import annotations

from pathlib import Path

from huey import RedisHuey, SqliteHuey
from huey.api import Huey

from reflect_jobs import sqlitefile
from reflect_jobs.perms import private_dir, private_file

from .config import Settings
from .fastqueue import QUEUE_NAME

#: ``(kept as, why)`` of every queue file this process moved aside (see :func:`make_huey`).
REPAIRS: list[tuple[str, str]] = []
#: The label of a damaged queue file moved aside (``queue.db.garbled-<UTC time>``).
GARBLED = "garbled"


def make_huey(settings: Settings, *, repair: bool = False) -> Huey:
    """Build the queue for ``settings`` (results are not stored: the ledger has them).

    Args:
        settings: Supplies ``queue_url``. A Redis URL gives a ``RedisHuey``; anything else
            is taken as ``sqlite:///PATH`` and gives a ``SqliteHuey`` on PATH, whose
            directory is created (30 s lock timeout, no fsync per write).
        repair: A consumer start: a damaged SQLite file is moved aside
            (:func:`reflect_jobs.sqlitefile.set_aside`) and an empty queue started; the move
            is appended to :data:`REPAIRS`. Readers (``status``, ``doctor``) leave it alone.

    Returns:
        The Huey instance named ``reflect`` (the queue the hook's fast path writes to),
        with UTC timestamps.
    """
    if settings.queue_is_redis:
        return RedisHuey(QUEUE_NAME, url=settings.queue_url, results=False, utc=True)
    path = Path(settings.queue_url[len("sqlite:///") :])
    private_dir(path.parent)
    if repair and (why := sqlitefile.damage(path)) is not None:
        REPAIRS.append((str(sqlitefile.set_aside(path, GARBLED)), why))
    private_file(path)  # 0600 before SQLite opens it: its -wal/-shm copy the mode
    return SqliteHuey(
        QUEUE_NAME, filename=str(path), results=False, utc=True, timeout=30, fsync=False
    )
