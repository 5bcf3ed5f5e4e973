"""jobs: an index on (harness, session_id), so a capture does not scan the ledger

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

Every capture asks for its session's jobs — the one still accepting captures (coalescing),
the spool's count-once check, the running pass of the session (prepare's claim) and the
idle sweep's in-flight check. The only index on those columns was the partial unique index
``WHERE accepting``, which SQLite's planner cannot use for ``accepting IS 1`` nor for the
other three queries: each scanned the whole ``jobs`` table, so a $0 job cost more the
longer the ledger's history (issue 22 item 8). A plain index on the two columns serves all
four on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_session", "jobs", ["harness", "session_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_jobs_session", table_name="jobs")
