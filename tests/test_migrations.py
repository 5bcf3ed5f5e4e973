"""Alembic owns the schema: head matches the models, on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from reflect_jobs.ledger import db
from reflect_jobs.ledger.models import Base

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _no_diff(engine) -> list:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn)
        return compare_metadata(ctx, Base.metadata)


def test_sqlite_upgrade_to_head_matches_models(tmp_path):
    engine = db.get_engine(f"sqlite:///{tmp_path}/l.db")
    cur, head = db.migration_status(engine)
    assert cur == head is not None
    assert _no_diff(engine) == []
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_upgrade_is_idempotent_and_safe_in_parallel(tmp_path):
    import threading

    url = f"sqlite:///{tmp_path}/p.db"
    engines = [db._make_engine(url) for _ in range(4)]
    errors = []

    def up(e):
        try:
            db.upgrade(e)
        except Exception as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    threads = [threading.Thread(target=up, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert db.current_revision(engines[0]) == db.migration_status(engines[0])[1]


@pytest.mark.services
def test_postgresql_upgrade_to_head_matches_models():
    name = "rj_mig_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        engine = db.get_engine(f"postgresql://postgres@127.0.0.1:5432/{name}")
        cur, head = db.migration_status(engine)
        assert cur == head
        assert _no_diff(engine) == []
        engine.dispose()
        db.dispose_all()
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
