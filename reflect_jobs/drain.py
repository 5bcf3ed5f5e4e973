"""``reflect-jobs drain``: a Huey consumer in this process until nothing is runnable now.

"Idle" must not be fooled by a message that was dequeued but whose task has not yet
touched the ledger, so it combines three views: Huey's queue is empty, no task is
executing (counted through Huey's signals), and the ledger has no running job and no
runnable job whose time has come. Deferred, retrying and settling jobs whose time is in
the future do not count (ARCHITECTURE §9). In dry-run mode no job ever moves, so one pass over
the due jobs is the whole drain.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from .config import Settings
from .ledger.db import session_scope
from .ledger.jobs import due_jobs
from .ledger.models import Job, utcnow

POLL_SEC = 0.1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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


class _StopSignals:
    """SIGINT/SIGTERM handlers for the drain's main loop (installed over Huey's own).

    ``consumer.start()`` installs Huey's handlers, but they only set a field that
    ``Consumer.run()``'s loop reads — and drain runs its own loop, so both signals were
    ignored and only SIGKILL stopped a drain. The first signal asks the loop to stop; a
    second one gets the default behaviour (Ctrl-C twice interrupts at once).
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum
        self.event.set()
        signal.signal(
            signum, signal.SIG_DFL if signum == signal.SIGTERM else signal.default_int_handler
        )

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

    @property
    def name(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum is not None else None


#: A prepare deferred for at most this long is waiting for its session's pass (drain waits).
WAITING_PASS_SEC = 10


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
        if due:
            return True
        # A capture waiting a moment for its session's running pass (ARCHITECTURE §14.1) is
        # work about to be due, not idleness: a drain must not stop before the final pass.
        soon = utcnow() + timedelta(seconds=WAITING_PASS_SEC)
        waiting = session.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.stage == "prepare", Job.state == "deferred", Job.next_run_at <= soon)
        )
        return bool(waiting)


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
            ``until_idle`` false, only a signal stops it then).
        workers: Consumer worker threads.

    SIGINT or SIGTERM stops it within a poll: the consumer stops without waiting for the
    tasks in flight, their model children are killed, and the jobs they held are handed
    back, due at once (:func:`reflect_jobs.stopping.stop_now`).

    Returns:
        ``{"seconds": elapsed, "counts": {state: jobs}}``, the counts over the whole ledger
        after the consumer stopped, sorted by state, plus ``"stopped_by": "SIGINT"`` or
        ``"SIGTERM"`` when a signal stopped it.
    """
    from . import tasks

    tasks.CONSUMER_KIND = "drain"  # its heartbeat is not a second worker's (status, doctor)
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
    stop = _StopSignals()
    tasks.runtime()
    tasks.recover_now(spool_min_age_sec=0)
    consumer.start()
    stop.install()
    idle_polls = 0
    stalled_since: float | None = None
    try:
        while True:
            if stop.event.wait(POLL_SEC):
                break
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
        stop.signum = stop.signum or signal.SIGINT
    finally:
        if stop.signum is None:
            consumer.stop(graceful=True)
        else:
            # Stopped by a person or the service manager: do not wait for the task in flight
            # (a model call can take minutes). Its model child is killed now and its job is
            # handed back, due at once for the next drain or worker — not a crash, and no
            # lease to wait out. Worker threads are daemons: they end with this process.
            consumer.stop(graceful=False)
            from .ledger.jobs import resume_claiming
            from .stopping import stop_now

            stop_now(
                settings,
                reason=f"stopping on {stop.name}",
                busy=lambda: inflight.n,
                resend=tasks.HueyDispatcher().schedule,
            )
            resume_claiming()  # an in-process caller of run_drain goes on claiming later
        stop.restore()
        huey.disconnect_signal(inflight)
    with session_scope(settings.db_url) as session:
        counts = Counter(
            dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        )
    summary: dict[str, Any] = {
        "seconds": time.monotonic() - started,
        "counts": dict(sorted(counts.items())),
    }
    if stop.name:
        summary["stopped_by"] = stop.name
    return summary
