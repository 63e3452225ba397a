"""post-call work (API.md section 16): when an ended conversation's work after the call
(its recording stored, summary, extractions, evaluations, `conversation.analysis`) is due;
null once done

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable): no batch copy of the table on SQLite.
    op.add_column(
        "conversations", sa.Column("post_call_due_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index("ix_conversations_post_call_due_at", "conversations", ["post_call_due_at"])


def downgrade() -> None:
    op.drop_index("ix_conversations_post_call_due_at", table_name="conversations")
    op.drop_column("conversations", "post_call_due_at")
