"""session watermarks: how far each session's transcript was reflected on and committed

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_watermarks",
        sa.Column("harness", sa.String(length=16), nullable=False),
        sa.Column("session_key", sa.String(length=1024), nullable=False),
        sa.Column("transcript_path", sa.Text(), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("harness", "session_key", name=op.f("pk_session_watermarks")),
    )


def downgrade() -> None:
    op.drop_table("session_watermarks")
