"""The KB-wide jobs: the coalesced repair + reindex and the community rebuild, one graph writer.

Their bodies run in the consumer's model child when it has one (ARCHITECTURE §8.1) and in
the process otherwise; both paths call this module, so neither the child
(``warm/child.py``) nor the index imports the Huey tasks (``tasks.py``, the top layer,
only wraps these functions as tasks).

The graph-writer lock is a gate (:mod:`reflect_jobs.gates`): on Redis (several machines)
a Huey lock with a TTL, so a consumer killed mid-reindex frees it when the TTL runs out;
locally an ``flock`` on ``$REFLECT_HOME/graph-writer.lock``, which the kernel releases the
moment the holder dies (a Huey lock on SQLite has no TTL, and ``huey_consumer -f`` only
flushes locks declared at start-up, so a SIGKILLed reindex used to block indexing for good).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from typing import Any

import structlog
from huey.constants import EmptyData
from huey.exceptions import TaskLockedException

from .config import Settings
from .faults import failpoint
from .gates import Defer, Go
from .index import maintenance
from .index.repair import repair as repair_graph
from .ledger import control
from .ledger.db import session_scope
from .perms import private_dir

# The log lines keep the logger name they had as part of ``tasks.py``.
log = structlog.get_logger("reflect_jobs.tasks")

REINDEX_PENDING = "kb:reindex-pending"
# Set while a reindex runs its passes; left behind only by a writer that died in one.
REINDEX_RUNNING = "kb:reindex-running"
GRAPH_LOCK = "graph-writer"
GRAPH_LOCK_TTL = 900


class GraphWriterLock:
    """One graph writer at a time, as a gate: never waited for, released when done.

    Args:
        huey: The queue (its lock on Redis).
        settings: Supplies the queue kind and ``$REFLECT_HOME``.
    """

    name = "graph_lock"

    def __init__(self, huey: Any, settings: Settings) -> None:
        """Bind the gate to the installation; nothing is locked until :meth:`acquire`."""
        self.huey = huey
        self.settings = settings

    def acquire(self) -> Go | Defer:
        """Take the lock now, or defer (no time: the holder serves the pending request).

        Returns:
            ``Go`` holding the lock, or ``Defer`` when another graph writer has it.
        """
        if self.settings.queue_is_redis:
            lock = self.huey.lock_task(GRAPH_LOCK, ttl=GRAPH_LOCK_TTL)
            try:
                lock.__enter__()
            except TaskLockedException:
                return Defer(self.name, "another graph writer holds the lock")
            return Go(self.name, lock)
        private_dir(self.settings.home)
        fd = os.open(self.settings.home / "graph-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return Defer(self.name, "another graph writer holds the lock")
        except BaseException:
            os.close(fd)
            raise
        return Go(self.name, fd)

    def release(self, go: Go) -> None:
        """Unlock.

        Args:
            go: The pass holding the lock.
        """
        if self.settings.queue_is_redis:
            go.taken.__exit__(None, None, None)
            return
        try:
            fcntl.flock(go.taken, fcntl.LOCK_UN)
        finally:
            os.close(go.taken)

    def refund(self, go: Go) -> None:
        """A lock is not a charge: :meth:`release` gives it back.

        Args:
            go: The pass this gate gave.
        """


@contextlib.contextmanager
def graph_writer(huey: Any, settings: Settings) -> Iterator[None]:
    """Hold the graph-writer lock for the body of a ``with`` block.

    Args:
        huey: The queue.
        settings: The installation's settings.

    Yields:
        Nothing; the lock is held until the block ends.

    Raises:
        TaskLockedException: Another graph writer holds the lock (it is not waited for).
    """
    gate = GraphWriterLock(huey, settings)
    go = gate.acquire()
    if isinstance(go, Defer):
        raise TaskLockedException(GRAPH_LOCK)
    try:
        yield
    finally:
        gate.release(go)


def reindex(huey: Any, settings: Settings, *, force: bool = False) -> dict | None:
    """Repair the graph, then reindex — one graph writer at a time, coalesced.

    Coalescing protocol: whoever wants a reindex sets the pending flag first (``kb_changed``
    only enqueues when it was empty). The writer pops the flag *while holding the lock* and
    loops until no request is left, so a request made during a run is served by the same
    task. A task that finds the lock taken just returns: its flag is still set, and the
    holder pops it before releasing. The running mark (``kb:reindex-running``) outlives a
    writer killed mid-pass, whose popped flag would otherwise be lost: recovery re-sends
    the task, and the pass finishes what the killed one left (the graph's debt is in the
    manifest, see ``maintenance.reindex``).

    Args:
        huey: The queue (its storage holds the flags).
        settings: The installation's settings.
        force: Rebuild every index from the notes on the first pass.

    Returns:
        The last pass's :meth:`~reflect_jobs.index.maintenance.ReindexStats.to_dict`, or
        ``None`` when another graph writer held the lock.
    """
    last: dict | None = None
    try:
        with graph_writer(huey, settings):
            # Marked before the pending flag is popped and cleared only after the last
            # pass: a writer killed in between leaves it, and recovery serves it again.
            # (An exception clears it too: only a death mid-pass leaves it behind.)
            huey.storage.put_data(REINDEX_RUNNING, b"1")
            try:
                first = True
                while huey.storage.pop_data(REINDEX_PENDING) is not EmptyData or first:
                    last = _reindex_once(settings, force=force and first)
                    first = False
            finally:
                huey.storage.pop_data(REINDEX_RUNNING)
    except TaskLockedException:
        return None
    return last


def _reindex_once(s: Settings, *, force: bool) -> dict:
    with session_scope(s.db_url) as session:
        count = control.incr_counter(session, "repairs_since_maintain")
        due = s.maintain_every > 0 and count >= s.maintain_every
        if due:
            control.set_flag(session, "repairs_since_maintain", "0")
    failpoint("reindex:holding_lock")
    report = repair_graph(
        s.kb_path, maintain=due, vectors=s.index_vectors, embed_model=s.embed_model
    )
    if report.action not in ("valid", "missing"):
        with session_scope(s.db_url) as session:
            control.record_error(
                session,
                kind="graphml_corrupt",
                severity="warn",
                message=f"{report.action}: {report.detail}",
            )
    stats = maintenance.reindex(
        s.kb_path, force=force, vectors=s.index_vectors, embed_model=s.embed_model
    )
    log.info("reindexed", repair=report.action, **stats.to_dict())
    if stats.errors:
        with session_scope(s.db_url) as session:
            control.record_error(
                session, kind="reindex_fail", message="; ".join(stats.errors)[:500]
            )
    return stats.to_dict()


def communities(huey: Any, settings: Settings) -> bool | None:
    """Re-cluster the graph and regenerate community reports if it changed.

    Args:
        huey: The queue (the graph-writer lock).
        settings: The installation's settings.

    Returns:
        ``True`` when it rebuilt, ``False`` when there was nothing to do, ``None`` when a
        reindex held the graph.
    """
    try:
        with graph_writer(huey, settings):
            return maintenance.rebuild_communities(
                settings.kb_path, vectors=settings.index_vectors, embed_model=settings.embed_model
            )
    except TaskLockedException:
        return None  # a reindex holds the graph; the next run catches up
