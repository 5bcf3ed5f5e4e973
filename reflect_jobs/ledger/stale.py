"""Learnings whose anchors are gone: out of circulation, and back (ARCHITECTURE §13.2).

The SessionStart hook withholds a learning whose every anchored path is gone from the
working tree (``recall/verify.py``); when that happened at
:data:`reflect_jobs.lifecycle.STALE_AFTER` consecutive session starts it hands the id to
the worker (``tasks.stale_anchors``), which calls :func:`mark_stale` then rewrites the note
(``pipeline/stale.py``): status ``stale_anchors`` in ledger and frontmatter, a history
snapshot first, and the coalesced reindex takes it out of the context store and search.

**Restore** is the one ``reflect-jobs restore ID`` (``pipeline/curation.py:restore``: any
status ``lifecycle.is_restorable`` says, ``stale_anchors`` included). It does not override
the working tree: a restored learning whose files are still gone is still withheld at
every session start, and handed over again a day later (``verify_store.REHAND_SEC``); its
streak ends when a session start finds its anchors again.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from ..lifecycle import ACTIVE, STALE_ANCHORS
from .learnings import _history
from .models import Learning, utcnow


def reason_text(missing: list[str]) -> str:
    """Why a learning left circulation, as stored in ``retired_reason`` and its history.

    Args:
        missing: The anchors found gone (``path`` or ``symbol in path``).

    Returns:
        ``anchors gone at N consecutive session starts: a.py, b.py`` (at most five named).
    """
    from ..lifecycle import STALE_AFTER

    shown = ", ".join(str(m) for m in missing[:5]) or "every anchor"
    more = f" (+{len(missing) - 5})" if len(missing) > 5 else ""
    return f"anchors gone at {STALE_AFTER} consecutive session starts: {shown}{more}"


def mark_stale(session: Session, learning_id: str, missing: list[str]) -> Learning | None:
    """Take an active learning out of circulation as ``stale_anchors``.

    Only an ``active`` learning moves: one a person retired, rejected or that waits for
    review (never told, so never verified stale) stays as it is, and one already
    ``stale_anchors`` is returned unchanged (the task may run twice).

    Args:
        session: An open write session.
        learning_id: The learning.
        missing: The anchors found gone.

    Returns:
        The row when it is (now) ``stale_anchors``; ``None`` when there is no such
        learning or it is in another status.
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None:
        return None
    if row.status == STALE_ANCHORS:
        return row
    if row.status != ACTIVE:
        return None
    reason = reason_text(missing)
    _history(session, row, "stale_anchors", reason, None)
    row.status = STALE_ANCHORS
    row.retired_reason = reason
    row.retired_at = utcnow()
    row.updated_at = row.retired_at
    return row


__all__ = ["mark_stale", "reason_text"]
