"""heartbeats.config: the worker's effective configuration with its heartbeat

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-10

`status` and `doctor` report what the *running worker* uses (writer backend, model, home,
version, pid, kind), not what the shell that asks would use, and flag a second worker on
the same home of one host. Rows written before this read as unknown (NULL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("heartbeats", schema=None) as batch_op:
        batch_op.add_column(sa.Column("config", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("heartbeats", schema=None) as batch_op:
        batch_op.drop_column("config")
