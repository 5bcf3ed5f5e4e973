"""learnings.is_latest: whether a learning is the newest word on its subject

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05

Contradiction demotion (issue 23, seed 003): a new learning whose title negates a similar
older one demotes the older — ``is_latest = 0`` and ``superseded_by`` the new id, recorded
in its history. Every row written before this is the latest it knows of (server default
true). ``reflect-jobs restore`` sets it back.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("is_latest", sa.Boolean(), server_default=sa.true(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.drop_column("is_latest")
