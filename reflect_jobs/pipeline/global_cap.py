"""At most a few new global learnings per session (issue 24 item 1: no single source takes over).

A global learning is told in *every* repository's session-start block, so one fooled writer
— a session that read a hostile README or tool output — could fill every repository's
general slots with its own lines (12 global CREATEs once took all 6). The add stage asks
:func:`cap_new_globals` before writing: a session may create at most
``REFLECT_MAX_NEW_GLOBAL_PER_SESSION`` (default 2) new global learnings across all its jobs;
any further new global CREATE is stored repository-scoped, in the session's repository, so
it still helps where it was learned and reaches nowhere else. A learning that already exists
(a second session writing it again) is no new global and is not counted. Without a known
repository nothing can be narrowed (the note would be global anyway, ``kb.note_scope``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from reflect_jobs import kb
from reflect_jobs.ledger.models import Learning

__all__ = ["cap_new_globals", "globals_created"]


def globals_created(session: Session, session_id: str | None) -> int:
    """How many global learnings the harness session ``session_id`` has already created.

    Args:
        session: An open ledger session.
        session_id: The harness session (``None``: no earlier job can be attributed: 0).

    Returns:
        The number of ledger rows recorded by that session with scope ``global``.
    """
    if not session_id:
        return 0
    query = select(func.count()).where(
        Learning.session_id == session_id, Learning.scope == "global"
    )
    return int(session.execute(query).scalar_one())


def cap_new_globals(
    creates: list[dict[str, Any]], *, is_new: list[bool], already: int, cap: int
) -> int:
    """Narrow the new global CREATEs past ``cap`` to their repository, in place.

    Args:
        creates: The learnings about to be written, in the answer's order (each with its
            ``repo`` key when the session's repository is known); a narrowed one gets
            ``scope: repo``.
        is_new: For each learning, whether it creates a learning the ledger does not have.
        already: New global learnings the session created in earlier jobs.
        cap: ``REFLECT_MAX_NEW_GLOBAL_PER_SESSION``.

    Returns:
        How many learnings were narrowed.
    """
    used, narrowed = already, 0
    for learning, new in zip(creates, is_new, strict=True):
        if not new or kb.note_scope(learning) != "global":
            continue
        if used < cap or not str(learning.get("repo") or "").strip():
            used += 1
            continue
        learning["scope"] = "repo"
        narrowed += 1
    return narrowed
