"""checkpoints: jobs.deep, jobs.cwd and session_checkpoints (when a capture makes a paid pass)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

ARCHITECTURE §14.1: a Stop makes a pass only when the session's context fill crosses a new
checkpoint; the end of a session (and a person's capture) makes the deep pass. Existing jobs
read as not deep (``server_default`` false); no session has a checkpoint row yet, so the
first capture of every running session starts its cycle. ``jobs.cwd`` keeps the hook
payload's working directory for the data boundary (ARCHITECTURE §2.2).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("deep", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.add_column(sa.Column("cwd", sa.Text(), nullable=True))
    op.create_table(
        "session_checkpoints",
        sa.Column("harness", sa.String(length=16), nullable=False),
        sa.Column("session_key", sa.String(length=1024), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("transcript_path", sa.Text(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("fill_pct", sa.Float(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.Column("last_capture_at", sa.DateTime(), nullable=False),
        sa.Column("idle_due_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("harness", "session_key", name=op.f("pk_session_checkpoints")),
    )
    with op.batch_alter_table("session_checkpoints", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_session_checkpoints_idle_due_at"), ["idle_due_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("session_checkpoints", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_session_checkpoints_idle_due_at"))
    op.drop_table("session_checkpoints")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("cwd")
        batch_op.drop_column("deep")
