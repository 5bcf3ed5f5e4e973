"""The object ``huey_consumer`` loads: ``huey_consumer workers.consumer.huey``.

Importing this module registers every task. On consumer start-up the first worker to come
up runs a recovery pass (expired leases back to ``queued``, every due job's message
re-sent, every capture left in the spool recorded), because Huey's SQLite transport deletes
a message when it is dequeued and a killed worker takes it along (ARCHITECTURE §1). The periodic ``recover`` task repeats this every
minute while the consumer runs.

It also starts the warm model service (ARCHITECTURE §8.1): from then on this process sends
search, similarity, reindex and community work to a child that exits when idle, and serves
CLI searches on ``$REFLECT_HOME/run/model.sock``.
"""

from __future__ import annotations

import threading

from reflect_jobs import tasks
from reflect_jobs.tasks import huey
from reflect_jobs.warm import server, supervisor

__all__ = ["huey"]

_recovered = threading.Event()
_lock = threading.Lock()


@huey.on_startup()
def _startup_recovery() -> None:
    with _lock:
        if _recovered.is_set():
            return
        _recovered.set()
        server.serve(tasks.settings, supervisor.activate(tasks.settings))
    tasks.recover_now(spool_min_age_sec=0)
