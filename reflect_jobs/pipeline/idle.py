"""The idle sweep: a session whose end never arrives still gets its deep pass (§14.1).

A crashed agent or a closed terminal sends no SessionEnd, so what was said after the last
checkpoint would wait for ever. Every Stop records when the session owes a deep pass
(``session_checkpoints.idle_due_at`` = last capture + ``REFLECT_SESSION_IDLE_SEC``); the
recovery pass, every minute, captures each session whose time has come and that has no job
in flight, with the event ``idle`` (a deep pass). The capture goes through the normal path:
the same gates, caps, quota and budget as any other.
"""

from __future__ import annotations

from reflect_jobs.checkpoints import IDLE_EVENT
from reflect_jobs.ledger import checkpoints
from reflect_jobs.ledger.db import session_scope

from .capture import run_capture
from .runtime import Runtime, log


def sweep_idle_sessions(rt: Runtime) -> int:
    """Capture every session owed its deep pass (idempotent; run by recovery).

    The owed mark is cleared only after the capture committed: a worker killed in between
    captures the session again at the next sweep, which coalesces into (or follows) the
    first capture's job and costs nothing more.

    Args:
        rt: The runtime.

    Returns:
        How many sessions were captured.
    """
    if rt.settings.disabled or not rt.settings.checkpoints:
        return 0
    with session_scope(rt.db, readonly=True) as session:
        due = [
            (r.harness, r.session_key, r.session_id, r.transcript_path)
            for r in checkpoints.idle_due(session)
        ]
    captured = 0
    for harness, key, session_id, path in due:
        job_id = run_capture(rt, harness, session_id, path, IDLE_EVENT, 0, deep=True)
        with session_scope(rt.db) as session:
            checkpoints.clear_idle(session, harness, key)
        captured += 1
        log.info("idle session captured", job_id=job_id, harness=harness, session_id=session_id)
    return captured
