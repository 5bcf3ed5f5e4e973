"""learnings.proposed_scope: a pending global learning, in the ledger

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04

No single source takes over (issue 24): a new global learning is written repository-scoped
with ``proposed_scope: global`` in its note until a second session or a person confirms it
(``pipeline/global_cap.py``). Only the note held that, so ``status`` needed a flag copied
into the context store and ``review`` read every repository-scoped note. The ledger now
mirrors it: ``"global"`` for a pending global, NULL otherwise — ``status``'s count and
``review``'s list are one query.

Existing rows are backfilled from their notes here (the rows of repository-scoped learnings
whose ``note_path`` is readable on this machine, by the one test ``kb.is_pending_global``);
a note that cannot be read stays NULL until ``reflect-jobs db rebuild``, which restores the
column from the notes.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("proposed_scope", sa.String(length=8), nullable=True))
    _backfill()


def _backfill() -> None:
    """Set ``proposed_scope`` of the rows whose note is a pending global (notes are the truth)."""
    from reflect_jobs import kb
    from reflect_jobs.fsio import read_regular
    from reflect_jobs.kb.parse import MAX_NOTE_BYTES

    conn = op.get_bind()
    learnings = sa.table(
        "learnings",
        sa.column("id", sa.String),
        sa.column("scope", sa.String),
        sa.column("note_path", sa.Text),
        sa.column("proposed_scope", sa.String),
    )
    rows = conn.execute(
        sa.select(learnings.c.id, learnings.c.note_path).where(
            learnings.c.scope == "repo", learnings.c.note_path.is_not(None)
        )
    ).all()
    pending = []
    for learning_id, note_path in rows:
        try:
            # A regular file, not a link, bounded (as every note read); most notes do not
            # name the key, and the YAML parse is what costs (the upgrade of a ledger with
            # 2,500 repository-scoped notes, 50 pending: 8.8 s parsing each, 0.7 s with this).
            raw = read_regular(Path(note_path), max_bytes=MAX_NOTE_BYTES).decode("utf-8")
            if kb.PROPOSED_SCOPE not in raw:
                continue
            fm = kb.parse_note(raw).frontmatter
        except (OSError, ValueError, kb.NoteError):
            continue
        if kb.is_pending_global(fm):
            pending.append(learning_id)
    for start in range(0, len(pending), 500):
        conn.execute(
            learnings.update()
            .where(learnings.c.id.in_(pending[start : start + 500]))
            .values(proposed_scope="global")
        )


def downgrade() -> None:
    with op.batch_alter_table("learnings", schema=None) as batch_op:
        batch_op.drop_column("proposed_scope")
