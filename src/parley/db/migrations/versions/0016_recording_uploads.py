"""recording uploads (API.md section 16): a recording waiting to be stored, kept in the
database until its store has it (retried, across restarts and instances), and which
external storage policy a conversation's recording is kept in

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07 08:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recording_uploads",
        sa.Column("org_id", sa.String(40), primary_key=True),
        sa.Column("conversation_id", sa.String(128), primary_key=True),
        sa.Column("object_key", sa.String(300), nullable=False),
        sa.Column("policy_id", sa.String(40), nullable=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_recording_uploads_next_attempt_at", "recording_uploads", ["next_attempt_at"]
    )
    # Plain ADD COLUMN (nullable): no batch copy of the table on SQLite.
    op.add_column("conversations", sa.Column("recording_policy_id", sa.String(40), nullable=True))


def downgrade() -> None:
    op.drop_column("conversations", "recording_policy_id")
    op.drop_index("ix_recording_uploads_next_attempt_at", table_name="recording_uploads")
    op.drop_table("recording_uploads")
