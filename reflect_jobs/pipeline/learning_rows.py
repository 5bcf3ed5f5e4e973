"""The ledger rows of written learnings: the add stage's and a person's ``add``'s one way.

Split from ``pipeline/add.py`` (``add.record_learning`` and ``add.contradictions`` still
name these): recording a learning whose note was just written — provenance, evidence,
anchors, its own ``forget_after`` — and finding the older learnings a new one negates.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from reflect_jobs import kb
from reflect_jobs.ledger import contradiction, learnings
from reflect_jobs.lifecycle import ACTIVE, normalise_learning_type
from reflect_jobs.recall import fading


def record_learning(
    session: Session,
    learning: dict[str, Any],
    note: Any,
    *,
    source: str,
    session_id: str | None,
    signal_hash: str | None,
    job_id: str | None,
    repo_key: str | None,
) -> learnings.UpsertResult:
    """The ledger row of a learning whose note was just written (the add stage's and a
    person's ``reflect-jobs add``'s one way of recording it).

    Args:
        session: The open write session of the commit.
        learning: The learning as written (``status`` set; ``anchors``, evidence keys read).
        note: The :class:`reflect_jobs.kb.NoteFile` the KB writer returned.
        source: What it was learned from (a transcript, or the file a person added).
        session_id: The harness session, if any.
        signal_hash: The signal set behind it, if any.
        job_id: The add job, if any.
        repo_key: The repository it was learned in (kept only for a ``repo`` learning; a
            pending global keeps the repository of its ``repo`` key).

    Returns:
        What :func:`reflect_jobs.ledger.learnings.upsert_learning` did. A learning carrying
        ``forget_after`` (an ISO UTC time, ``recall/fading.py``) has it recorded too, for
        the hourly sweep (``pipeline/expiry.py``); one without keeps what the row had. A
        pending global has ``proposed_scope`` ``"global"`` (its note's key, mirrored).
    """
    scope = kb.note_scope(learning)
    res = learnings.upsert_learning(
        session,
        learning_id=note.id,
        title=str(learning.get("title", "")),
        category=str(learning.get("category") or "Unknown"),
        learning_type=normalise_learning_type(learning.get("learning_type")),
        confidence_num=float(learning.get("confidence_num") or 0.6),
        note_path=str(note.path),
        content_hash=note.content_hash,
        source=source,
        session_id=session_id,
        signal_hash=signal_hash,
        job_id=job_id,
        scope=scope,
        repo_key=(str(learning.get("repo") or "") or repo_key) if scope == "repo" else None,
        status=learning["status"],
        evidence=str(learning.get("evidence") or "") or None,
        evidence_origin=str(learning.get("evidence_origin") or "") or None,
        anchors=list(learning.get("anchors") or []),
        forget_after=fading.parse_forget_after(learning.get("forget_after") or None),
        # A pending global: what its note says (``global_cap.note_extra``), by the note's test.
        proposed_scope="global" if kb.is_pending_global({**learning, "scope": scope}) else None,
    )
    return res


def contradictions(
    session: Session, written: list[tuple[dict[str, Any], Any]], repo_key: str | None
) -> list[tuple[str, str]]:
    """``(older id, new id)`` for every older learning a newly written active one negates.

    Args:
        session: The open session of the commit (the new rows are already in it).
        written: ``(learning, note)`` as written.
        repo_key: The repository they were learned in.

    Returns:
        The pairs, each older id once (:mod:`reflect_jobs.ledger.contradiction`).
    """
    pairs: dict[str, str] = {}
    new_ids = {note.id for _, note in written}
    for learning, note in written:
        if learning.get("status") != ACTIVE:
            continue  # a learning no one vouched for demotes nothing
        key = repo_key if kb.note_scope(learning) == "repo" else None
        title = str(learning.get("title", ""))
        for old_id in contradiction.contradicted(session, note.id, title, key):
            if old_id not in new_ids:
                pairs.setdefault(old_id, note.id)
    return list(pairs.items())
