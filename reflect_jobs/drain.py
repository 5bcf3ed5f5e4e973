"""``reflect-jobs drain``: a Huey consumer in this process until nothing is runnable now.

"Idle" must not be fooled by a message that was dequeued but whose task has not yet
touched the ledger, so it combines three views: Huey's queue is empty, no task is
executing (counted through Huey's signals), and the ledger has no running job and no
runnable job whose time has come. Deferred, retrying and settling jobs whose time is in
the future do not count (ARCHITECTURE §9). In dry-run mode no job ever moves, so one pass over
the due jobs is the whole drain.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from sqlalchemy import func, select

from .config import Settings
from .ledger.db import session_scope
from .ledger.jobs import due_jobs
from .ledger.models import Job

POLL_SEC = 0.1


class _InFlight:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, signal: str, task: Any, *args: Any) -> None:
        from huey import signals as S

        with self.lock:
            if signal == S.SIGNAL_EXECUTING:
                self.n += 1
            elif signal in (
                S.SIGNAL_COMPLETE,
                S.SIGNAL_ERROR,
                S.SIGNAL_LOCKED,
                S.SIGNAL_INTERRUPTED,
                S.SIGNAL_RATE_LIMITED,
                S.SIGNAL_RETRYING,
                S.SIGNAL_CANCELED,
                S.SIGNAL_REVOKED,
                S.SIGNAL_EXPIRED,
                S.SIGNAL_TIMEOUT,
            ):
                self.n = max(0, self.n - 1)


def _ledger_busy(settings: Settings) -> bool:
    with session_scope(settings.db_url, readonly=True) as session:
        running = session.scalar(
            select(func.count()).select_from(Job).where(Job.state == "running")
        )
        if running:
            return True
        due = due_jobs(session, limit=50)
        if settings.dry_run:
            return False
        return bool(due)


def run_drain(
    settings: Settings, *, until_idle: bool, max_seconds: float | None, workers: int
) -> dict[str, Any]:
    """Run a Huey consumer in this process, after one recovery pass, until told to stop.

    Args:
        settings: The settings (the ledger to watch; dry-run mode changes what "idle" is).
        until_idle: Stop after three polls in a row (0.1 s apart) find Huey's queue empty,
            no task executing and the ledger with no running or due job. While the queue
            is quiet but the ledger has due work for more than 1.5 s, recovery re-sends it.
        max_seconds: Stop after this long in any case; ``None`` for no limit (with
            ``until_idle`` false, only Ctrl-C stops it then).
        workers: Consumer worker threads.

    Returns:
        ``{"seconds": elapsed, "counts": {state: jobs}}``, the counts over the whole ledger
        after the consumer stopped, sorted by state.
    """
    from . import tasks

    huey = tasks.huey
    inflight = _InFlight()
    huey.signal()(inflight)
    consumer = huey.create_consumer(
        workers=workers,
        worker_type="thread",
        periodic=False,
        initial_delay=0.02,
        max_delay=0.2,
        backoff=1.2,
        scheduler_interval=1,
        check_worker_health=False,
    )
    started = time.monotonic()
    tasks.runtime()
    tasks.recover_now(spool_min_age_sec=0)
    consumer.start()
    idle_polls = 0
    stalled_since: float | None = None
    try:
        while True:
            time.sleep(POLL_SEC)
            if max_seconds is not None and time.monotonic() - started >= max_seconds:
                break
            if not until_idle:
                continue
            transport_quiet = huey.pending_count() == 0 and inflight.n == 0
            busy = _ledger_busy(settings)
            idle_polls = idle_polls + 1 if transport_quiet and not busy else 0
            if idle_polls >= 3:
                break
            # The ledger says work is due but nothing carries it: a message was lost
            # (or scheduled for a time that has now come). Re-send from the ledger.
            if transport_quiet and busy:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 1.5:
                    tasks.recover_now()
                    stalled_since = None
            else:
                stalled_since = None
    except KeyboardInterrupt:
        pass
    finally:
        consumer.stop(graceful=True)
        huey.disconnect_signal(inflight)
    with session_scope(settings.db_url) as session:
        counts = Counter(
            dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        )
    return {"seconds": time.monotonic() - started, "counts": dict(sorted(counts.items()))}
