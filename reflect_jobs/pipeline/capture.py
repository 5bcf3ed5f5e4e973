"""The capture stage: a session ended, so record (or coalesce) its job and schedule prepare.

Capture does no work on the transcript: it stats the file, writes one ledger row through
``record_capture`` (which coalesces repeated captures of a session into one job) and asks
for ``prepare`` once the transcript has had time to settle.
"""

from __future__ import annotations

import contextlib
import math
import os
import time

from reflect_jobs import spool
from reflect_jobs.checkpoints import is_deep_event
from reflect_jobs.faults import failpoint
from reflect_jobs.ledger import control, gateway
from reflect_jobs.ledger.captures import capture_recorded, record_capture
from reflect_jobs.ledger.db import session_scope
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
    spool_id: str | None = None,
    deep: bool | None = None,
    cwd: str | None = None,
) -> str | None:
    """Record (or coalesce) the capture and schedule prepare after the settle delay.

    A capture the hook spooled (``spool_id``) is recorded at most once: when the ledger
    already has it (its message and the spool's recovery both delivered it) nothing is
    recorded or scheduled again. The spool entry is deleted only after the job row
    committed, so a worker killed before that commit (failpoint ``before_commit:capture``)
    or a ledger that is down leaves the entry for :func:`reconcile_spool`.

    Args:
        rt: The runtime.
        harness: ``claude``, ``codex``, ``copilot``…
        session_id: The harness's session id (``unknown`` when empty).
        transcript_path: The transcript file.
        event: The hook event that fired.
        settle_sec: Override of ``capture_settle_sec`` (0 = prepare now).
        hook_ts: When the hook enqueued the capture (``time.time()``); logged as
            ``queue_delay_ms``, the time the message waited for a worker.
        spool_id: The hook's spool entry id (:mod:`reflect_jobs.spool`); ``None`` for
            captures that were not spooled (``enqueue``, ``backfill``, older hooks). An id
            of the wrong shape is ignored.
        deep: Whether the capture asks for a deep pass (ARCHITECTURE §14.1); ``None``
            decides by ``event`` (PreCompact, SessionEnd, idle, manual, backfill). A
            person's capture (``enqueue``, ``backfill``) passes True whatever its event.
        cwd: The session's working directory from the hook payload, kept on the job for the
            data boundary (``None``: none given).

    Returns:
        The job id (``None`` when reflect-jobs is disabled, or for a spooled capture already
        recorded whose job is no longer accepting captures).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: The ledger is unreachable or the commit failed; the
            spool entry stays and Huey retries the task when the message asked for it.
    """
    if rt.settings.disabled:
        return None
    if spool_id is not None and not spool.valid_id(spool_id):
        spool_id = None
    # The payload is outside input: a NUL fails PostgreSQL (and os.stat), and the ledger's
    # columns are bounded (jobs.session_id 200, event 32, harness 16).
    harness = bounded(str(harness), 16)
    session_id = bounded(str(session_id or ""), 200)
    transcript_path = clean_text(str(transcript_path))
    event = bounded(str(event), 32)
    cwd = clean_text(str(cwd)) if cwd else None
    try:
        st = os.stat(transcript_path)
        size, mtime = st.st_size, st.st_mtime
    except OSError:
        size, mtime = None, None
    settle = rt.settings.capture_settle_sec if settle_sec is None else settle_sec
    sid = session_id or "unknown"
    duplicate = False
    with gateway.transaction(rt.db) as session:
        if spool_id is not None and capture_recorded(
            session, harness=harness, session_id=sid, capture_id=spool_id
        ):
            duplicate = True
        else:
            res = record_capture(
                session,
                harness=harness,
                session_id=sid,
                transcript_path=transcript_path,
                event=event,
                size=size,
                mtime=mtime,
                settle_sec=settle,
                capture_id=spool_id,
                deep=is_deep_event(event) if deep is None else deep,
                cwd=cwd,
            )
            failpoint("before_commit:capture")
    if spool_id is not None:
        spool.delete(str(rt.settings.home), spool_id)  # committed (or already was)
    if duplicate:
        log.info("capture already recorded", spool_id=spool_id, harness=harness)
        return None
    log.info(
        "captured",
        job_id=res.job_id,
        created=res.created,
        harness=harness,
        session_id=session_id,
        hook_event=event,
        **({"spool_id": spool_id} if spool_id else {}),
        **queue_delay(hook_ts),
    )
    # Always (re)schedule: a coalesced capture pushed the settle time out, and the earlier
    # message will find the job not yet due. Extra messages are harmless no-op claims.
    rt.dispatcher.schedule("prepare", res.job_id, res.prepare_at if settle > 0 else None)
    return res.job_id


SPOOL_MIN_AGE_SEC = 5.0


def reconcile_spool(rt: Runtime, *, min_age_sec: float = SPOOL_MIN_AGE_SEC) -> dict[str, int]:
    """Turn every capture still in the spool into a job (recovery; ARCHITECTURE §1).

    An entry is left there when its queue message was lost with a killed worker, when the
    queue was down or locked while the hook ran, or when the ledger was down for its
    worker (a whole entry a killed hook left under its temporary name counts too). Entries are recorded oldest first through :func:`run_capture`, which skips
    (and deletes) the ones the ledger already has. A malformed entry is renamed to
    ``<id>.bad`` with an errors-ledger row, so it stops coming back but is not lost; any
    other failure (the ledger is down) leaves the entry for the next pass.

    Args:
        rt: The runtime (its ``settings.home`` holds the spool).
        min_age_sec: Only entries at least this old: a younger one's message is probably
            being consumed right now. Start-up passes 0.

    Returns:
        ``{"spooled": n, "failed": n, "bad": n}``: entries handed to the capture stage,
        entries that raised, entries set aside as malformed.
    """
    if rt.settings.disabled:
        return {"spooled": 0, "failed": 0, "bad": 0}
    home = str(rt.settings.home)
    done = failed = bad = 0
    spool.adopt_stale_temps(home)  # entries of hooks killed before their rename
    for entry_id in spool.entry_ids(home, min_age_sec=min_age_sec):
        try:
            entry = spool.read_entry(home, entry_id)
        except (OSError, ValueError) as exc:
            bad += 1
            _set_aside(rt, home, entry_id, str(exc))
            continue
        if entry is None:
            continue  # consumed meanwhile
        try:
            run_capture(
                rt,
                entry["harness"],
                entry["session_id"],
                entry["transcript_path"],
                entry["event"],
                hook_ts=entry["hook_ts"],
                spool_id=entry_id,
                cwd=entry.get("cwd"),
            )
            done += 1
        except Exception as exc:  # noqa: BLE001 - one entry must not stop recovery
            failed += 1
            log.warning("spool entry not recorded", spool_id=entry_id, error=repr(exc)[:300])
    if done or failed or bad:
        log.info("spool reconciled", spooled=done, failed=failed, bad=bad)
    return {"spooled": done, "failed": failed, "bad": bad}


def _set_aside(rt: Runtime, home: str, entry_id: str, why: str) -> None:
    try:
        kept = spool.set_aside(home, entry_id)
    except OSError as exc:
        kept = f"(could not rename: {exc})"
    log.warning("spool entry malformed", spool_id=entry_id, error=why, kept=kept)
    with contextlib.suppress(Exception), session_scope(rt.db) as session:
        control.record_error(
            session, kind="spool_bad", message=f"{why}; kept as {kept}"[:500], severity="warn"
        )


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
