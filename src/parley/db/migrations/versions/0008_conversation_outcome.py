"""the outcome of a conversation: who ended it, per-turn latencies, interruptions

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN: a batch copy on SQLite would drop and recreate `conversations`,
    # firing the ON DELETE actions of the tables referring to it (see 0005).
    op.add_column("conversations", sa.Column("ended_by", sa.String(length=16), nullable=True))
    op.add_column(
        "conversations",
        sa.Column("latencies_ms", sa.JSON(), nullable=False, server_default="[]"),
    )
    op.add_column(
        "conversations",
        sa.Column("interruptions_count", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("interruptions_count")
        batch_op.drop_column("latencies_ms")
        batch_op.drop_column("ended_by")
