"""learnings.scope and learnings.repo_key: which repository a learning was learned in

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-01

Existing rows read as global (ARCHITECTURE §13): ``scope`` gets a server default.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("scope", sa.String(length=8), server_default="global", nullable=False)
        )
        batch_op.add_column(sa.Column("repo_key", sa.String(length=300), nullable=True))
        batch_op.create_index(batch_op.f("ix_learnings_repo_key"), ["repo_key"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_learnings_repo_key"))
        batch_op.drop_column("repo_key")
        batch_op.drop_column("scope")
