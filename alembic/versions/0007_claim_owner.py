"""claim owner: jobs.owner_host, owner_pid, owner_start (who holds a running job)

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-03

ARCHITECTURE §3.2: a claim records its owner — host, process id and the process's start
token — so recovery on the owner's own machine can prove it gone (no such pid, a zombie, or
the pid reused by a process that started at another time) and take the job back at once
instead of after its lease. Jobs running when this migrates have no owner recorded and keep
the lease rule.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_host", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("owner_pid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("owner_start", sa.String(length=160), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("owner_start")
        batch_op.drop_column("owner_pid")
        batch_op.drop_column("owner_host")
