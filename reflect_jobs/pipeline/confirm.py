"""Confirmations sent to the worker: an agent fetched a learning through MCP ``get``.

The MCP server answers from the notes and the context store; it does not write the ledger
in the agent's path. It pushes ``tasks.confirm_learnings([[id, by, session]])`` on the
queue (``recall/tools.py``), and the worker records each here: the ledger first
(``ledger/confirmations.py:record_confirmation``, one short commit), then the note's
``confirmations``/``last_confirmed`` (``pipeline/note_edits.py`` op ``confirm``), then the
context store and search at once (``index/immediate.py``), so a dormant learning an agent
just used is told again at the next session start. Every step is idempotent.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from reflect_jobs.index.immediate import apply_now
from reflect_jobs.ledger import confirmations
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.recall.fading import iso

from . import note_edits

#: At most this many confirmations are taken from one message (it came through a queue
#: anything local may write: hostile shapes and sizes are skipped).
MAX_PER_MESSAGE = 50


def apply_confirmations(kb_path: str | os.PathLike[str], db: str, entries: Any) -> list[str]:
    """Record confirmations sent through the queue (the worker's task body).

    Args:
        kb_path: The KB root.
        db: The ledger URL.
        entries: ``[[id, by, session or None], …]``; ``by`` one of
            :data:`reflect_jobs.ledger.confirmations.KINDS`.

    Returns:
        The ids whose confirmation was recorded (their notes rewritten when they could be).
    """
    wanted: list[tuple[str, str, str | None]] = []
    for entry in entries if isinstance(entries, list) else []:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 3):
            continue
        ident, by, sid = entry
        if not isinstance(ident, str) or by not in confirmations.KINDS or len(ident) > 200:
            continue
        wanted.append((ident, by, sid if isinstance(sid, str) and sid else None))
        if len(wanted) >= MAX_PER_MESSAGE:
            break
    done: list[str] = []
    with session_scope(db) as session:
        for ident, by, sid in wanted:
            if confirmations.record_confirmation(session, ident, by=by, session_id=sid):
                done.append(ident)
    if done:
        now = iso(datetime.now(UTC))
        note_edits.apply_direct(db, [note_edits.confirm(i, now) for i in done])
        apply_now(kb_path, done)
    return done
