"""SQLAlchemy models of the ledger: the durable truth about jobs, money and learnings.

Huey's storage only carries "run stage S of job J"; everything a person or a recovery pass
needs to know lives here. Types are chosen to run unchanged on SQLite and PostgreSQL
(ARCHITECTURE §10): strings for ids, JSON for small lists, timezone-aware UTC timestamps.
The schema itself is created by the Alembic migrations in ``alembic/``; these classes must
stay in step with them (``tests/test_ledger.py`` checks that no diff exists).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """Store naive UTC, hand back aware UTC.

    SQLite has no time zones and compares timestamps as text; storing every value as naive
    UTC keeps ``<`` comparisons in SQL correct on both back ends.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        """Convert a value on its way into the database.

        Args:
            value: An aware datetime (any zone), a naive one (taken as UTC), or ``None``.
            dialect: SQLAlchemy's dialect (unused).

        Returns:
            The naive UTC datetime to store, or ``None``.
        """
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        """Convert a value read from the database.

        Args:
            value: The stored datetime (naive UTC), or ``None``.
            dialect: SQLAlchemy's dialect (unused).

        Returns:
            The same instant as an aware UTC datetime, or ``None``.
        """
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    """Now, as an aware UTC datetime (what the ledger stores and compares against).

    Returns:
        ``datetime.now(UTC)``.
    """
    return datetime.now(UTC)


NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """The declarative base; its naming convention gives constraints stable names."""

    metadata = MetaData(naming_convention=NAMING)


class Job(Base):
    """One capture of one transcript, moving through the stages (ARCHITECTURE §3)."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    harness: Mapped[str] = mapped_column(String(16))
    session_id: Mapped[str] = mapped_column(String(200))
    transcript_path: Mapped[str] = mapped_column(Text)
    event: Mapped[str] = mapped_column(String(32), default="unknown")
    captures: Mapped[int] = mapped_column(Integer, default=1)
    transcript_size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    transcript_mtime: Mapped[float | None] = mapped_column(Float, nullable=True)

    stage: Mapped[str] = mapped_column(String(16), default="capture")
    state: Mapped[str] = mapped_column(String(16), default="queued")
    outcome: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    # money and failure accounting (SPEC-drain §5.7), per job instead of per path forever (B15)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    timeouts: Mapped[int] = mapped_column(Integer, default=0)
    invalid_streak: Mapped[int] = mapped_column(Integer, default=0)
    recoveries: Mapped[int] = mapped_column(Integer, default=0)

    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Who holds a running job (migration 0007; ``ledger/owners.py``): on the owner's machine
    # recovery proves it gone from these and takes the job back at once, not after the lease.
    owner_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    owner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_start: Mapped[str | None] = mapped_column(String(160), nullable=True)
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # True while later captures of the same session may still coalesce into this job.
    accepting: Mapped[bool] = mapped_column(Boolean, default=True)
    # True when a capture coalesced into the job asks for a deep pass (ARCHITECTURE §14.1):
    # PreCompact, SessionEnd, idle, or a person's enqueue/backfill. Sticky: a later Stop
    # coalescing into the same job never turns the end of a session into a checkpoint.
    deep: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The session's working directory from the hook payload, for the data boundary
    # (ARCHITECTURE §2.2); None for captures without one (enqueue, backfill).
    cwd: Mapped[str | None] = mapped_column(Text, nullable=True)

    # products of prepare / write, kept so a retry never redoes paid or lost work
    slice_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    signal_hash: Mapped[str | None] = mapped_column(String(32), nullable=True)
    chunk_hashes: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    related_ids: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    prepare_stats: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    actions: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (
        Index("ix_jobs_state_next_run_at", "state", "next_run_at"),
        Index("ix_jobs_transcript_path", "transcript_path"),
        # A session's jobs (coalescing, the spool's check, its running pass): every capture
        # and claim asks, so no scan of the ledger's history (migration 0010).
        Index("ix_jobs_session", "harness", "session_id"),
        # At most one job per session accepts new captures: the coalescing key (ARCHITECTURE §3).
        Index(
            "uq_jobs_accepting_session",
            "harness",
            "session_id",
            unique=True,
            sqlite_where=text("accepting"),
            postgresql_where=text("accepting"),
        ),
    )


class JobEvent(Base):
    """Every transition of every job, written in the same transaction as the change."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    from_stage: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_stage: Mapped[str | None] = mapped_column(String(16), nullable=True)
    from_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_state: Mapped[str] = mapped_column(String(16))
    outcome: Mapped[str | None] = mapped_column(String(64), nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(128), nullable=True)


class CostRow(Base):
    """One row per model attempt or free outcome (SPEC-drain §5.6 fields).

    A paid attempt's row is committed with the raw answer *before* the answer is parsed
    (``outcome`` is ``pending`` until classified), so a crash after the call can never
    hide what was spent or make us pay twice: the retried stage finds the pending row and
    reuses its answer.
    """

    __tablename__ = "costs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), index=True, nullable=True
    )
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    day: Mapped[str] = mapped_column(String(10), index=True)
    transcript: Mapped[str] = mapped_column(Text, default="")
    outcome: Mapped[str] = mapped_column(String(64), default="pending")
    entries: Mapped[int] = mapped_column(Integer, default=0)
    backend: Mapped[str] = mapped_column(String(32), default="")
    model: Mapped[str] = mapped_column(String(64), default="")
    writer_class: Mapped[str] = mapped_column(String(16), default="")
    turns: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    input: Mapped[int] = mapped_column(BigInteger, default=0)
    output: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_creation: Mapped[int] = mapped_column(BigInteger, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    raw_answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    consumed: Mapped[bool] = mapped_column(Boolean, default=False)


class Learning(Base):
    """A learning in the KB; the note file is the content, this row its provenance."""

    __tablename__ = "learnings"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    category: Mapped[str] = mapped_column(String(64), default="Unknown")
    learning_type: Mapped[str] = mapped_column(String(32), default="bug-fix")
    confidence_num: Mapped[float] = mapped_column(Float, default=0.6)
    status: Mapped[str] = mapped_column(String(16), default="active", index=True)
    proof_count: Mapped[int] = mapped_column(Integer, default=1)
    signal_hash: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    session_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    source_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    note_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    content_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_by_job: Mapped[str | None] = mapped_column(String(32), nullable=True)
    retired_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    superseded_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Recall scope (ARCHITECTURE §13): "repo" (learned in repo_key) or "global".
    scope: Mapped[str] = mapped_column(String(8), default="global", server_default="global")
    repo_key: Mapped[str | None] = mapped_column(String(300), nullable=True, index=True)
    # What proves it (ARCHITECTURE §6/§7, migration 0006): a verbatim quote of the slice,
    # whose words it is (person | assistant | tool), and the code it names that exists.
    evidence: Mapped[str | None] = mapped_column(Text, nullable=True)
    evidence_origin: Mapped[str | None] = mapped_column(String(16), nullable=True)
    anchors: Mapped[list[dict[str, str]] | None] = mapped_column(JSON, nullable=True)
    # The newest word on its subject (migration 0009): a later learning whose title negates
    # this one's sets it false and ``superseded_by`` (ledger/contradiction.py).
    is_latest: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # Usage and fading (migration 0011, ledger/confirmations.py): how often and when last a
    # later session, an agent's MCP ``get`` or a person confirmed it; and its own TTL
    # (seed 003's ``forget_after``), past which the hourly sweep forgets it.
    confirmations: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    forget_after: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    # A pending global (migration 0012, pipeline/global_cap.py): ``"global"`` while its note
    # says ``scope: repo`` + ``proposed_scope: global``, else NULL — mirrored here so
    # ``status`` and ``review`` count and list them in one query without reading notes.
    proposed_scope: Mapped[str | None] = mapped_column(String(8), nullable=True)


class LearningSource(Base):
    """Proof: each distinct source (transcript) counts once — idempotent UPDATE."""

    __tablename__ = "learning_sources"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    learning_id: Mapped[str] = mapped_column(
        ForeignKey("learnings.id", ondelete="CASCADE"), index=True
    )
    source: Mapped[str] = mapped_column(String(512))
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (UniqueConstraint("learning_id", "source"),)


class LearningConfirmation(Base):
    """One confirmation of a learning: a later session's UPDATE with evidence (``update``),
    an agent's MCP ``get`` (``get``) or a person's acceptance (``person``)."""

    __tablename__ = "learning_confirmations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    learning_id: Mapped[str] = mapped_column(
        ForeignKey("learnings.id", ondelete="CASCADE"), index=True
    )
    by: Mapped[str] = mapped_column(String(16))
    session_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LearningHistory(Base):
    """A snapshot written before every mutation of a learning (SPEC-drain §8)."""

    __tablename__ = "learning_history"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    learning_id: Mapped[str] = mapped_column(String(128), index=True)
    change_type: Mapped[str] = mapped_column(String(32))
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ChunkHash(Base):
    """Dialogue windows already turned into learnings (delta retain, SPEC-drain §3.3).

    Written only when the add stage commits (B2 fix): a failed or crashed write never
    marks its chunks as seen.
    """

    __tablename__ = "chunk_hashes"

    hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    transcript_path: Mapped[str] = mapped_column(Text, default="")
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


TRANSCRIPT_KEY_MAX = 1024  # transcripts.path is VARCHAR(1024)


def transcript_key(path: str) -> str:
    """The ``transcripts.path`` key for a transcript path (bounded; see ``sanitize.bounded``).

    Args:
        path: A job's transcript path.

    Returns:
        ``path`` itself up to 1024 characters, else its head and a hash of the whole.
    """
    from ..sanitize import bounded

    return bounded(path, TRANSCRIPT_KEY_MAX)


class Transcript(Base):
    """The last size/mtime of each transcript that reached a terminal outcome.

    Lets capture answer "unchanged since it was processed" for free without reading it.
    """

    __tablename__ = "transcripts"

    path: Mapped[str] = mapped_column(String(1024), primary_key=True)
    harness: Mapped[str] = mapped_column(String(16), default="claude")
    session_id: Mapped[str] = mapped_column(String(200), default="unknown")
    last_job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    last_outcome: Mapped[str | None] = mapped_column(String(64), nullable=True)
    size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    mtime: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SessionWatermark(Base):
    """How far into each session's transcript a committed add has reflected (ARCHITECTURE §3.1).

    Keyed by harness and session id (the transcript path when the id is unknown).
    ``byte_offset`` is the offset just past the last dialogue record the add's slice was cut from and
    ``digest`` the sha256 of the file's bytes up to it: a later prepare sends only what came
    after it, and treats the file as a new transcript when its prefix no longer hashes to
    ``digest`` (truncated or rewritten). Written only in the add's commit, with the chunk
    hashes, so a failed write never moves it.
    """

    __tablename__ = "session_watermarks"

    harness: Mapped[str] = mapped_column(String(16), primary_key=True)
    session_key: Mapped[str] = mapped_column(String(1024), primary_key=True)
    transcript_path: Mapped[str] = mapped_column(Text, default="")
    byte_offset: Mapped[int] = mapped_column(BigInteger, default=0)
    digest: Mapped[str] = mapped_column(String(64), default="")
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SessionCheckpoint(Base):
    """Where a session stands between captures: its checkpoints and its owed deep pass.

    ``level`` is the highest checkpoint (percent) passed in the current context cycle and
    ``fill_pct`` the fill the last capture saw (ARCHITECTURE §14.1). ``idle_due_at`` is set
    when a Stop was seen after the last deep pass: if no further capture arrives by then, the
    idle sweep captures the session for its deep pass. Written in prepare's verdict commit.
    """

    __tablename__ = "session_checkpoints"

    harness: Mapped[str] = mapped_column(String(16), primary_key=True)
    session_key: Mapped[str] = mapped_column(String(1024), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(200), default="")
    transcript_path: Mapped[str] = mapped_column(Text, default="")
    level: Mapped[int] = mapped_column(Integer, default=0)
    fill_pct: Mapped[float] = mapped_column(Float, default=0.0)
    passes: Mapped[int] = mapped_column(Integer, default=0)
    last_capture_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    idle_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class QuotaSnapshot(Base):
    """Last rate-limit telemetry per window bucket (SPEC-drain §5.5), last write wins."""

    __tablename__ = "quota_snapshots"

    bucket: Mapped[str] = mapped_column(String(32), primary_key=True)
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSON)
    observed_at: Mapped[float] = mapped_column(Float)


class Control(Base):
    """Small named flags: the write-stage halt, maintenance counters."""

    __tablename__ = "control"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Heartbeat(Base):
    """One row per consumer process, refreshed periodically (doctor/status staleness)."""

    __tablename__ = "heartbeats"

    worker: Mapped[str] = mapped_column(String(128), primary_key=True)
    host: Mapped[str] = mapped_column(String(128))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    beat_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: The consumer's effective configuration (migration 0006): ``kind`` (worker | drain),
    #: ``home``, ``kb_path``, ``writer_backend``, ``model``, ``version``, ``pid``, ``host``.
    config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class ErrorRecord(Base):
    """The errors ledger (SPEC-drain §5.11 kinds): deduplicated, countable, acknowledgeable."""

    __tablename__ = "errors"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    severity: Mapped[str] = mapped_column(String(8))
    source: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    context: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    count: Mapped[int] = mapped_column(Integer, default=1)
    acked: Mapped[bool] = mapped_column(Boolean, default=False)
    first_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RetireProposal(Base):
    """A retirement held back by the daily retire cap, for a person to apply or reject.

    One session re-captured as it grows could otherwise retire every listed learning (24
    of 24 in five turns): beyond ``REFLECT_MAX_RETIRE_PER_DAY`` automatic retirements per
    UTC day a DELETE becomes a ``pending`` row here instead (``status``, ``reflect-jobs
    proposals``). ``note_synced`` is False while an applied retirement still owes its
    note's rewrite (the periodic recovery finishes it, as for a job's note edits).
    """

    __tablename__ = "retire_proposals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    learning_id: Mapped[str] = mapped_column(String(128), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    source: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    note_synced: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    decided_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
