"""Learnings whose anchors are gone: out of circulation, and back (ARCHITECTURE §13.1).

The SessionStart hook withholds a learning whose every anchored path is gone from the
working tree (``recall/verify.py``); when that happened at
:data:`reflect_jobs.lifecycle.STALE_AFTER` consecutive session starts it hands the id to
the worker (``tasks.stale_anchors``), which calls :func:`mark_stale` then rewrites the note
(``pipeline/stale.py``): status ``stale_anchors`` in ledger and frontmatter, a history
snapshot first, and the coalesced reindex takes it out of the context store and search.

**Restore** (``reflect-jobs restore ID``, whose command the curation work owns) calls
:func:`restore` for a ``stale_anchors`` learning — ledger first, then the note with
``kb.accept_note`` (status ``active``), then ``recall.verify_store.VerifyStore.reset`` on
this machine's verification store so its streak starts from zero, then a reindex:
``pipeline/stale.py:restore_learning`` does all four.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from ..lifecycle import ACTIVE, STALE_ANCHORS
from .learnings import _history
from .models import Learning, utcnow


class StaleError(LookupError):
    """No learning has this id, or it is not ``stale_anchors`` (one line for the CLI)."""


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


def restore(session: Session, learning_id: str, *, by: str) -> Learning:
    """Bring a ``stale_anchors`` learning back into circulation (ledger side).

    Args:
        session: An open write session.
        learning_id: The learning.
        by: Who restored it (stored in the history).

    Returns:
        The row, now ``active`` (already active: returned unchanged).

    Raises:
        StaleError: No such learning, or it is neither ``stale_anchors`` nor active.
    """
    row = session.get(Learning, learning_id, with_for_update=True)
    if row is None:
        raise StaleError(f"no learning {learning_id}")
    if row.status == ACTIVE:
        return row
    if row.status != STALE_ANCHORS:
        raise StaleError(f"{learning_id} is {row.status}, not {STALE_ANCHORS}")
    _history(session, row, "restored", f"restored by {by}", None)
    row.status = ACTIVE
    row.retired_reason = None
    row.retired_at = None
    row.updated_at = utcnow()
    return row


__all__ = ["StaleError", "mark_stale", "reason_text", "restore"]
