"""Alembic environment for the reflect-jobs ledger.

Run through ``reflect-jobs db upgrade`` (or automatically on first use); the connection or
URL is handed over in ``config.attributes`` so no alembic.ini with credentials is needed.
"""

from __future__ import annotations

from sqlalchemy import create_engine

from alembic import context
from reflect_jobs.ledger.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.attributes.get("connection_url") or config.get_main_option("sqlalchemy.url")
    engine = create_engine(url)
    with engine.begin() as conn:
        context.configure(
            connection=conn,
            target_metadata=target_metadata,
            render_as_batch=conn.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations()
