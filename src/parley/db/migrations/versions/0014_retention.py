"""retention (API.md section 16): an agent's data retention policy, the policy a
conversation went live with and when its transcript and recording are due for deletion,
and the jobs one instance at a time runs (the retention sweep)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07 06:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

CONVERSATION_COLUMNS = (
    ("retention", sa.JSON()),
    ("transcripts_due_at", sa.DateTime(timezone=True)),
    ("audio_due_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    # Plain ADD COLUMN (nullable): no batch copy of a table on SQLite.
    op.add_column("agents", sa.Column("data_retention_policy", sa.JSON(), nullable=True))
    for name, kind in CONVERSATION_COLUMNS:
        op.add_column("conversations", sa.Column(name, kind, nullable=True))
    op.create_index("ix_conversations_transcripts_due_at", "conversations", ["transcripts_due_at"])
    op.create_index("ix_conversations_audio_due_at", "conversations", ["audio_due_at"])
    op.create_table(
        "jobs",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_jobs")),
    )


def downgrade() -> None:
    op.drop_table("jobs")
    op.drop_index("ix_conversations_audio_due_at", table_name="conversations")
    op.drop_index("ix_conversations_transcripts_due_at", table_name="conversations")
    for name, _ in reversed(CONVERSATION_COLUMNS):
        op.drop_column("conversations", name)
    op.drop_column("agents", "data_retention_policy")
