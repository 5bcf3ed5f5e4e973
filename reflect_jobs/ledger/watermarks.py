"""Per-session watermarks: send a grown transcript's new turns only (ARCHITECTURE §3.1).

Delta retain by chunk hash alone re-sends a window whose boundaries moved when lines were
added after it (its hash changed), so a session captured after every turn paid again and
again for what it had already learned. The watermark records, per session, the byte offset
just past the last dialogue record a committed add reflected on, with the sha256 of the
file up to it. Prepare reads it (:func:`current`), the reader checks the prefix in the same
pass, and the cascade sends only what came after it (plus context lines marked as such).

It is advanced only inside the add's commit (:func:`advance`), beside the chunk hashes: a
write that fails, retries or is poisoned leaves it where it was, so the next attempt or the
next capture sends the same chunks again ("a retry never loses its chunks").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .models import SessionWatermark, utcnow

UNKNOWN_SESSION = "unknown"


@dataclass(frozen=True)
class Mark:
    """A watermark: ``offset`` bytes of the transcript whose sha256 is ``digest``."""

    offset: int
    digest: str


def session_key(session_id: str | None, transcript_path: str) -> str:
    """The key a session's watermark is stored under.

    Args:
        session_id: The harness's session id; ``unknown`` or empty when the capture had none.
        transcript_path: The transcript file.

    Returns:
        The session id, or ``path:<transcript_path>`` when the id is unknown (so sessions
        without an id do not share one watermark).
    """
    if not session_id or session_id == UNKNOWN_SESSION:
        return f"path:{transcript_path}"
    return session_id


def current(
    session: Session | Connection, harness: str, session_id: str | None, transcript_path: str
) -> Mark | None:
    """The session's committed watermark, if an add has committed one.

    Args:
        session: An open ledger session.
        harness: The job's harness.
        session_id: The job's session id.
        transcript_path: The job's transcript (the key when the id is unknown).

    Returns:
        The :class:`Mark`, or None for a session never reflected on.
    """
    key = {"harness": harness, "key": session_key(session_id, transcript_path)}
    row = session.execute(_SELECT_MARK, key).first()
    return None if row is None else Mark(int(row.byte_offset), str(row.digest))


_SELECT_MARK = select(SessionWatermark.byte_offset, SessionWatermark.digest).where(
    SessionWatermark.harness == bindparam("harness"),
    SessionWatermark.session_key == bindparam("key"),
)


def plan(base: Mark | None, prefix_digest: str | None, end: Mark) -> dict[str, Any]:
    """What prepare stores on the job: the mark it read from, whether it held, the new mark.

    Args:
        base: The committed watermark prepare started from (None: none yet).
        prefix_digest: The digest of the file's first ``base.offset`` bytes as read now
            (None when no record ends there).
        end: The watermark of the transcript as read now (end of its last dialogue record).

    Returns:
        ``{"base_offset", "base_digest", "since", "reset", "offset", "digest"}``: ``since``
        is the offset the cascade may skip up to (0 after a reset), ``reset`` says the file
        no longer starts with what was reflected (truncated or rewritten: a new transcript).
    """
    holds = base is not None and base.offset > 0 and prefix_digest == base.digest
    return {
        "base_offset": base.offset if base else 0,
        "base_digest": base.digest if base else "",
        "since": base.offset if holds and base else 0,
        "reset": base is not None and not holds,
        "offset": end.offset,
        "digest": end.digest,
    }


def advance(
    session: Session,
    *,
    harness: str,
    session_id: str | None,
    transcript_path: str,
    planned: dict[str, Any] | None,
    job_id: str,
) -> bool:
    """Record the job's new watermark — called only inside the add stage's commit.

    The row is replaced when it is still the one prepare started from (this also carries a
    reset, i.e. a rewritten file, through), or when the new offset lies further on. A job
    prepared before another job of the same session committed can therefore never move the
    watermark back.

    Args:
        session: The add's open write session.
        harness: The job's harness.
        session_id: The job's session id.
        transcript_path: The job's transcript.
        planned: The job's ``prepare_stats["watermark"]`` (:func:`plan`); None or an
            offset of 0 (a transcript read before watermarks existed) records nothing.
        job_id: The committing job.

    Returns:
        True when the row was written.
    """
    if not planned or int(planned.get("offset") or 0) <= 0:
        return False
    offset, digest = int(planned["offset"]), str(planned.get("digest") or "")
    key = (harness, session_key(session_id, transcript_path))
    row = session.get(SessionWatermark, key, with_for_update=True)
    if row is None:
        try:
            with session.begin_nested():
                session.add(
                    SessionWatermark(
                        harness=harness,
                        session_key=key[1],
                        transcript_path=transcript_path,
                        byte_offset=offset,
                        digest=digest,
                        job_id=job_id,
                        updated_at=utcnow(),
                    )
                )
            return True
        except IntegrityError:  # another consumer committed the first mark meanwhile
            row = session.get(SessionWatermark, key, with_for_update=True, populate_existing=True)
            if row is None:
                return False
    unchanged = row.byte_offset == int(planned.get("base_offset") or 0) and row.digest == str(
        planned.get("base_digest") or ""
    )
    if not unchanged and offset <= row.byte_offset:
        return False
    row.byte_offset, row.digest = offset, digest
    row.transcript_path, row.job_id, row.updated_at = transcript_path, job_id, utcnow()
    return True
