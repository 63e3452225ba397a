"""conversations.turn_timings: per reply, its stages' timings (API.md section 18)

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 14:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN with a constant default: no batch copy of the table on SQLite.
    op.add_column(
        "conversations",
        sa.Column("turn_timings", sa.JSON(), nullable=False, server_default="[]"),
    )


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch_op:
        batch_op.drop_column("turn_timings")
