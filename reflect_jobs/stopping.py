"""What a consumer (``drain`` or ``worker``) does when it stops on SIGINT/SIGTERM.

Before, a stopped drain left its job ``running`` for the whole lease (six minutes by
default), and every stop was later counted as a crash: the fourth stop poisoned the job
(``poison_crash_loop``) after four started model calls that had no cost row at all. Now the
stopping process, before it exits:

1. takes no new claim (:func:`reflect_jobs.ledger.jobs.stop_claiming`);
2. kills every guarded child's group (:func:`reflect_jobs.children.kill_live_children`): a
   model call in flight ends now, not minutes later, and raises ``ChildCancelled``;
3. gives its task threads a moment to unwind (the write stage settles a cut-short call's
   cost row as ``interrupted`` there);
4. hands back every job it still holds (:func:`reflect_jobs.ledger.jobs.hand_back`): queued
   at its stage, due now, no recovery counted; a recorded paid answer is reused later;
5. re-sends those jobs' messages, so another consumer (or the next ``drain``) runs them at
   once instead of at its next recovery sweep.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import structlog

from .children import kill_live_children
from .config import Settings
from .ledger import jobs, owners
from .ledger.db import session_scope

log = structlog.get_logger("reflect_jobs.stopping")

#: How long the task threads get to unwind after their children were killed.
UNWIND_SEC = 5.0


def stop_now(
    settings: Settings,
    *,
    reason: str,
    busy: Callable[[], int],
    resend: Callable[[str, str], Any] | None = None,
    unwind_sec: float = UNWIND_SEC,
) -> list[tuple[str, str]]:
    """Stop this process's work and hand its jobs back (see the module docstring).

    Args:
        settings: The settings (the ledger).
        reason: Why, recorded on each job's event (``stopping on SIGTERM``).
        busy: How many tasks are still running in this process (polled until 0).
        resend: ``resend(stage, job_id)`` enqueues a stage's message; ``None`` leaves the
            jobs to the next recovery sweep.
        unwind_sec: The longest wait for ``busy()`` to reach 0; then the jobs are handed
            back anyway (a thread still running can no longer commit: its lease is gone).

    Returns:
        ``(job id, stage)`` of every job handed back.
    """
    jobs.stop_claiming()
    killed = kill_live_children()
    deadline = time.monotonic() + unwind_sec
    while busy() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        with session_scope(settings.db_url) as session:
            handed = jobs.hand_back(session, owners.me(), reason=reason)
    except Exception as exc:  # noqa: BLE001 - the ledger is down: start-up recovery does it
        log.warning("hand-back failed", reason=reason, error=f"{type(exc).__name__}: {exc}")
        return []
    for job_id, stage in handed:
        if resend is not None:
            with contextlib.suppress(Exception):
                resend(stage, job_id)
    if handed or killed:
        log.info("stopped", reason=reason, handed_back=len(handed), children_killed=killed)
    return handed
