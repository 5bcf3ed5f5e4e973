"""What a consumer does after its queue file was found garbled and rebuilt empty.

``queue.make_huey(repair=True)`` moves a damaged SQLite queue aside at start and records the
move in :data:`reflect_jobs.queue.REPAIRS`; the queue is transport, never the truth, so the
loss is repaired from the ledger here (ARCHITECTURE §2.3): the errors ledger says what
happened (``status``/``errors``/``doctor`` show it), the caps' counters — which lived in the
lost file — are reseeded from the ledger's cost rows so today's budget cannot be spent
twice, and a reindex is requested (a request lost with the file is served). Recovery then
re-sends every due job and spooled capture.
"""

from __future__ import annotations

from typing import Any

import structlog

from . import queue
from .kb_jobs import REINDEX_PENDING
from .ledger import control, costs
from .ledger.db import session_scope
from .limits import Caps

log = structlog.get_logger("reflect_jobs.queue_repair")


def record_repairs(storage: Any, db_url: str, caps: Caps) -> int:
    """Record and repair every queue file this process moved aside (idempotent: each once).

    Args:
        storage: The new queue's Huey storage (the reindex request goes there).
        db_url: The ledger.
        caps: The daily/run-window caps over ``storage``, reseeded from the ledger.

    Returns:
        How many repairs were handled (0 on a healthy start).
    """
    handled = 0
    while queue.REPAIRS:
        kept, why = queue.REPAIRS.pop(0)
        handled += 1
        try:
            with session_scope(db_url) as session:
                control.record_error(
                    session,
                    kind="queue_rebuilt",
                    severity="warn",
                    message=f"queue file unusable ({why}); moved aside to {kept} and "
                    "rebuilt empty: due jobs and spooled captures are re-sent from the "
                    "ledger and the spool",
                    context={"kept": kept},
                )
                day_used, window_used = costs.spent_now(session, caps.window_sec)
            caps.seed(day_used, window_used)
        except Exception as exc:  # noqa: BLE001 - the ledger may be down too; go on
            log.warning("queue rebuilt; not recorded", kept=kept, error=str(exc)[:200])
        storage.put_if_empty(REINDEX_PENDING, b"1")
        log.warning("queue rebuilt", kept=kept, why=why)
    return handled
