"""redaction (API.md section 16): an agent's `enable_redaction`, and whether a conversation
went live with it

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-09 06:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN with a constant default: no batch copy of a table on SQLite.
    op.add_column(
        "agents",
        sa.Column("enable_redaction", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column(
        "conversations",
        sa.Column("redacted", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("conversations", "redacted")
    op.drop_column("agents", "enable_redaction")
