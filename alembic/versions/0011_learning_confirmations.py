"""learnings.confirmations, last_confirmed_at, forget_after and learning_confirmations

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04

Usage and fading (issue 23 item 2). A learning is *confirmed* when a later session's pass
UPDATEs it with evidence, an agent fetches it through MCP ``get``, or a person accepts it;
each confirmation is one ``learning_confirmations`` row (when, by which kind, which
session) and the learning keeps the count and the time of the last one, which the context
store reads (through the note) to let a learning nobody confirmed for
``REFLECT_FORGET_UNUSED_DAYS`` go dormant. ``forget_after`` (seed 003) is the moment a
learning's own TTL runs out: the hourly sweep forgets it (indexed: the sweep asks only for
the due ones). Rows written before this have no confirmation (0, NULL) and no TTL.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("confirmations", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("last_confirmed_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("forget_after", sa.DateTime(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_learnings_forget_after"), ["forget_after"], unique=False
        )
    op.create_table(
        "learning_confirmations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("learning_id", sa.String(length=128), nullable=False),
        sa.Column("by", sa.String(length=16), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=True),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learning_id"],
            ["learnings.id"],
            name=op.f("fk_learning_confirmations_learning_id_learnings"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learning_confirmations")),
    )
    with op.batch_alter_table("learning_confirmations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_learning_confirmations_learning_id"), ["learning_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("learning_confirmations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_learning_confirmations_learning_id"))
    op.drop_table("learning_confirmations")
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_learnings_forget_after"))
        batch_op.drop_column("forget_after")
        batch_op.drop_column("last_confirmed_at")
        batch_op.drop_column("confirmations")
