"""Engines, sessions and migrations for the ledger.

SQLite is tuned for many short writers (the consumer's worker threads, the CLI, several
consumer processes): WAL journal, a generous busy timeout, foreign keys on. Transactions
are kept short by construction — no model call or file I/O ever happens inside one.

The schema is owned by Alembic (``alembic/`` in the repository, shipped inside the package as
``reflect_jobs._migrations`` so a wheel install migrates too). :func:`get_engine` upgrades to head on first
use, under a cross-process lock, so a fresh machine needs no separate setup step.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, CursorResult, Engine, Executable, create_engine, event, inspect
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config

from reflect_jobs.perms import private_dir, private_file

SQLITE_BUSY_TIMEOUT_SEC = 30
READONLY = "reflect_readonly"

_engines: dict[str, Engine] = {}
_sessionmakers: dict[str, sessionmaker[Session]] = {}
_lock = threading.Lock()


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` and pick the psycopg 3 driver we ship.

    Args:
        url: A SQLAlchemy database URL.

    Returns:
        ``url`` with a ``postgresql://`` or ``postgres://`` scheme rewritten to
        ``postgresql+psycopg://``; any other URL unchanged.
    """
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("postgres://"):
        return "postgresql+psycopg://" + url[len("postgres://") :]
    return url


def _sqlite_path(url: str) -> Path | None:
    if not url.startswith("sqlite"):
        return None
    path = url.split(":///", 1)[1] if ":///" in url else ""
    return Path(path) if path and path != ":memory:" else None


def sqlite_file(url: str) -> Path | None:
    """The ledger's file for a ``sqlite:///`` URL, or None (PostgreSQL, in-memory).

    Args:
        url: The ledger's URL.

    Returns:
        The path.
    """
    return _sqlite_path(normalise_url(url))


def damage_line(url: str) -> str | None:
    """One line naming a damaged SQLite ledger and the fix, or None when it is usable.

    A garbled ``reflect.db`` used to end every command in a traceback and give no fix.

    Args:
        url: The ledger's URL (PostgreSQL is never judged here: None).

    Returns:
        ``the ledger PATH is damaged (WHY): …`` naming ``reflect-jobs db check``, a restore
        and ``reflect-jobs db rebuild``; None for a usable, missing or locked file.
    """
    from reflect_jobs import sqlitefile

    path = sqlite_file(url)
    why = sqlitefile.damage(path) if path is not None else None
    if why is None:
        return None
    return (
        f"the ledger {path} is damaged ({why}): run `reflect-jobs db check`, then restore it "
        "from a backup or rebuild it from the notes with `reflect-jobs db rebuild`"
    )


def _make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = _sqlite_path(url)
        if path is not None:
            private_dir(path.parent)
            private_file(path)  # 0600 before SQLite opens it: its -wal/-shm copy the mode
        engine = create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SEC, "check_same_thread": False},
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
            # Let SQLAlchemy own BEGIN so that BEGIN IMMEDIATE (see write_session) works.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_SEC * 1000}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # IMMEDIATE takes the write lock up front: no deadlock-prone lock upgrade
            # between two workers that both read then write. Read-only sessions (status,
            # jobs, show…) use a plain deferred BEGIN: under WAL they never wait for a writer.
            if conn.get_execution_options().get(READONLY):
                conn.exec_driver_sql("BEGIN")
            else:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


def get_engine(url: str, *, migrate: bool = True) -> Engine:
    """The process-wide engine for ``url``, migrated to head on first use.

    Args:
        url: The ledger's database URL (``sqlite:///…`` or PostgreSQL); a SQLite file's
            directory is created when missing.
        migrate: Run :func:`upgrade` when the engine is first made. Later calls return the
            cached engine whatever this says.

    Returns:
        The engine, shared by every caller in this process until :func:`dispose_all`.
    """
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _make_engine(url)
            if migrate:
                upgrade(engine)
            _engines[url] = engine
            _sessionmakers[url] = sessionmaker(engine, expire_on_commit=False)
        return engine


def dispose_all() -> None:
    """Drop cached engines (tests, and after fork in a consumer)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _sessionmakers.clear()


@contextlib.contextmanager
def session_scope(url: str, *, readonly: bool = False) -> Iterator[Session]:
    """One short transaction: commit on success, roll back on any error.

    ``readonly=True`` is for reporting paths: on SQLite it reads a WAL snapshot without
    taking the write lock, so ``status`` answers while a worker holds the ledger.

    Args:
        url: The ledger's database URL (its engine is made, and migrated, on first use).
        readonly: Begin with a deferred ``BEGIN`` instead of ``BEGIN IMMEDIATE`` on SQLite.
            It is still committed at the end, so nothing stops a caller from writing.

    Yields:
        A session whose objects stay loaded after the commit (``expire_on_commit=False``).

    Raises:
        BaseException: Whatever the block raised, after the rollback.
    """
    get_engine(url)
    session = _sessionmakers[url]()
    if readonly:
        session.connection(execution_options={READONLY: True})
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def rows_affected(session: Session, statement: Executable) -> int:
    """Run an UPDATE or DELETE and say how many rows it matched.

    The compare-and-set claims and the sweeps decide on this count. SQLAlchemy returns a
    ``CursorResult`` for such a statement, but ``Session.execute`` is typed as returning a
    plain ``Result``, which has no ``rowcount``: this is the one place that says so.

    Args:
        session: The open session to run ``statement`` in.
        statement: An ``update(...)`` or ``delete(...)`` statement.

    Returns:
        The driver's row count (``-1`` where a driver cannot tell, as SQLAlchemy reports it).
    """
    result = cast("CursorResult[Any]", session.execute(statement))
    return result.rowcount


def migrations_dir() -> Path:
    """Where the Alembic scripts are, in a checkout and in a wheel alike.

    Returns:
        The directory holding ``env.py`` and ``versions/`` (see :mod:`reflect_jobs.resources`).
    """
    from reflect_jobs.resources import shipped_dir

    return shipped_dir("reflect_jobs._migrations", "alembic", "env.py")


def alembic_config(engine: Engine) -> Config:
    """An Alembic config for ``engine``, built in code so no ``alembic.ini`` holds credentials.

    Args:
        engine: The ledger's engine; its URL is handed to ``alembic/env.py``.

    Returns:
        An ``alembic.config.Config`` whose script location is :func:`migrations_dir`.
    """
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["connection_url"] = engine.url
    return cfg


def _head_revision(cfg: Config) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(cfg).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at, read without taking the write lock.

    Args:
        engine: The ledger's engine.

    Returns:
        The revision id, or ``None`` for a database Alembic has never touched.
    """
    from alembic.runtime.migration import MigrationContext

    with engine.connect().execution_options(**{READONLY: True}) as conn:
        return MigrationContext.configure(conn).get_current_revision()


def migration_status(engine: Engine) -> tuple[str | None, str | None]:
    """(current, head) revisions, for ``doctor``.

    Args:
        engine: The ledger's engine.

    Returns:
        ``(current, head)``: the database's revision (``None`` when unmigrated) and the
        newest revision in ``alembic/`` (``None`` if there are no migrations).
    """
    return current_revision(engine), _head_revision(alembic_config(engine))


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Serialise migrations across processes: a file lock for SQLite, an advisory lock for PG."""
    if engine.dialect.name == "sqlite":
        path = _sqlite_path(str(engine.url))
        lock_path = (path.parent if path else Path("/tmp")) / ".reflect-migrate.lock"
        with open(os.open(lock_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    else:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_advisory_lock(724310031)")
            try:
                yield
            finally:
                conn.exec_driver_sql("SELECT pg_advisory_unlock(724310031)")
                conn.commit()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Alembic ``upgrade head`` unless already there (cheap check first).

    The check is repeated under a cross-process lock (a file lock beside the SQLite file, an
    advisory lock on PostgreSQL) so consumers starting together migrate once.

    Args:
        engine: The ledger's engine.
        revision: The target revision; anything but ``"head"`` always runs Alembic.
    """
    cfg = alembic_config(engine)
    head = _head_revision(cfg)
    if revision == "head" and current_revision(engine) == head:
        return
    from alembic import command

    with _migration_lock(engine):
        if revision == "head" and current_revision(engine) == head:
            return
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)


def table_names(engine: Engine) -> list[str]:
    """The tables in the ledger's database.

    Args:
        engine: The ledger's engine.

    Returns:
        The table names, sorted.
    """
    return sorted(inspect(engine).get_table_names())
