"""retire proposals: retirements held back by the daily retire cap

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retire_proposals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("learning_id", sa.String(length=128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("note_synced", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("decided_at", sa.DateTime(), nullable=True),
        sa.Column("decided_by", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retire_proposals")),
    )
    with op.batch_alter_table("retire_proposals", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_retire_proposals_learning_id"), ["learning_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_retire_proposals_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("retire_proposals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_retire_proposals_status"))
        batch_op.drop_index(batch_op.f("ix_retire_proposals_learning_id"))
    op.drop_table("retire_proposals")
