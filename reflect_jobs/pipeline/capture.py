"""The capture stage: a session ended, so record (or coalesce) its job and schedule prepare.

Capture does no work on the transcript: it stats the file, writes one ledger row through
``record_capture`` (which coalesces repeated captures of a session into one job) and asks
for ``prepare`` once the transcript has had time to settle.
"""

from __future__ import annotations

import math
import os
import time

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.jobs import record_capture
from reflect_jobs.sanitize import bounded, clean_text

from .runtime import Runtime, log


def run_capture(
    rt: Runtime,
    harness: str,
    session_id: str,
    transcript_path: str,
    event: str = "unknown",
    settle_sec: int | None = None,
    hook_ts: float | None = None,
) -> str | None:
    """Record (or coalesce) the capture and schedule prepare after the settle delay.

    Args:
        rt: The runtime.
        harness: ``claude``, ``codex``, ``copilot``…
        session_id: The harness's session id (``unknown`` when empty).
        transcript_path: The transcript file.
        event: The hook event that fired.
        settle_sec: Override of ``capture_settle_sec`` (0 = prepare now).
        hook_ts: When the hook enqueued the capture (``time.time()``); logged as
            ``queue_delay_ms``, the time the message waited for a worker.

    Returns:
        The job id, or None when reflect-jobs is disabled.
    """
    if rt.settings.disabled:
        return None
    # The payload is outside input: a NUL fails PostgreSQL (and os.stat), and the ledger's
    # columns are bounded (jobs.session_id 200, event 32, harness 16).
    harness = bounded(str(harness), 16)
    session_id = bounded(str(session_id or ""), 200)
    transcript_path = clean_text(str(transcript_path))
    event = bounded(str(event), 32)
    try:
        st = os.stat(transcript_path)
        size, mtime = st.st_size, st.st_mtime
    except OSError:
        size, mtime = None, None
    settle = rt.settings.capture_settle_sec if settle_sec is None else settle_sec
    with session_scope(rt.db) as session:
        res = record_capture(
            session,
            harness=harness,
            session_id=session_id or "unknown",
            transcript_path=transcript_path,
            event=event,
            size=size,
            mtime=mtime,
            settle_sec=settle,
        )
    log.info(
        "captured",
        job_id=res.job_id,
        created=res.created,
        harness=harness,
        session_id=session_id,
        hook_event=event,
        **queue_delay(hook_ts),
    )
    # Always (re)schedule: a coalesced capture pushed the settle time out, and the earlier
    # message will find the job not yet due. Extra messages are harmless no-op claims.
    rt.dispatcher.schedule("prepare", res.job_id, res.prepare_at if settle > 0 else None)
    return res.job_id


def queue_delay(hook_ts: object, now: float | None = None) -> dict[str, int]:
    """``{"queue_delay_ms": …}``: how long a hook's message waited in the queue, or ``{}``.

    The hook puts ``time.time()`` in every capture message; a worker that picks it up much
    later (no consumer running, a backlog) shows it here, in ``drain.log``. A clock behind
    the hook's (another machine on a Redis queue) gives 0, not a negative delay.

    Args:
        hook_ts: The message's hook timestamp (None for ``enqueue``/``backfill`` captures,
            and anything that is not a finite number from an unexpected message).
        now: The current time (default ``time.time()``).

    Returns:
        The delay in whole milliseconds, or an empty dict when there is no usable timestamp.
    """
    if isinstance(hook_ts, bool) or not isinstance(hook_ts, int | float):
        return {}
    if not math.isfinite(hook_ts):
        return {}
    delay = (time.time() if now is None else now) - hook_ts
    return {"queue_delay_ms": max(0, round(delay * 1000))}
