"""recordings and deletions (API.md section 16): where a conversation's recording is kept,
when it was stored, when its transcript and its audio were deleted; conversations by ID
alone (a recording's signed URL names no organization)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 05:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

COLUMNS = (
    ("recording_key", sa.String(300)),
    ("recorded_at", sa.DateTime(timezone=True)),
    ("transcripts_deleted_at", sa.DateTime(timezone=True)),
    ("audio_deleted_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    # Plain ADD COLUMN (nullable): no batch copy of the table on SQLite.
    for name, kind in COLUMNS:
        op.add_column("conversations", sa.Column(name, kind, nullable=True))
    op.create_index("ix_conversations_id", "conversations", ["id"])


def downgrade() -> None:
    op.drop_index("ix_conversations_id", table_name="conversations")
    for name, _ in reversed(COLUMNS):
        op.drop_column("conversations", name)
