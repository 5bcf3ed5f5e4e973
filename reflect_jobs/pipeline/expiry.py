"""The ``forget_after`` sweep: a learning whose own TTL ran out is forgotten (seed 003).

A person (an ``add`` file's ``forget_after``) may give a learning a date or a TTL
(``recall/fading.py:parse_forget_after``); it is stored absolute in the note and the
ledger (``learnings.forget_after``, migration 0011). The worker runs :func:`forget_expired`
every hour (``tasks.forget_expired``): each learning still in use whose time has passed is
forgotten by the very path a person's ``reflect-jobs forget`` takes
(``pipeline/curation.py:forget``: ledger ``archived`` with history, note and sidecar moved
to ``documents/.forgotten/``, search and the context store updated at once), so
``reflect-jobs restore ID`` brings it back — and clears the TTL, so the next sweep leaves it.
"""

from __future__ import annotations

import os
from datetime import datetime

from reflect_jobs.ledger import confirmations, control
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.recall.fading import iso

from . import curation


def forget_expired(
    kb_path: str | os.PathLike[str], db: str, now: datetime | None = None
) -> list[str]:
    """Forget every learning whose ``forget_after`` has passed.

    Args:
        kb_path: The KB root.
        db: The ledger URL.
        now: The current time (default now).

    Returns:
        The ids forgotten by this pass (a failure on one is recorded in the error ledger
        and the rest go on; the next pass tries it again).
    """
    with session_scope(db, readonly=True) as session:
        due = [
            (lid, session.get(Learning, lid)) for lid in confirmations.due_to_forget(session, now)
        ]
        when = {lid: row.forget_after for lid, row in due if row is not None}
    done: list[str] = []
    for lid, at in when.items():
        stamp = iso(at) if at is not None else "?"
        try:
            curation.forget(kb_path, db, lid, by=f"its forget_after ({stamp})")
        except (curation.CurationError, OSError) as exc:
            with session_scope(db) as session:
                control.record_error(
                    session,
                    kind="forget_after_failed",
                    severity="warn",
                    message=f"{lid}: {type(exc).__name__}: {exc}"[:500],
                )
            continue
        done.append(lid)
    return done
