"""learnings.evidence, evidence_origin and anchors: what proves a learning, whose words, which code

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

ARCHITECTURE §6/§7: every learning a model creates carries a verbatim quote of the slice it
was learned from (``evidence``, at most 300 characters), who wrote that quote
(``evidence_origin``: ``person``, ``assistant`` or ``tool``) and the repository paths and
symbols it names that exist (``anchors``, a JSON list of ``{path, symbol?}``, at most 10).
Rows written before this have none (NULL); a learning waiting for review uses the existing
``status`` column (``proposed``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("evidence", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("evidence_origin", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("anchors", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.drop_column("anchors")
        batch_op.drop_column("evidence_origin")
        batch_op.drop_column("evidence")
