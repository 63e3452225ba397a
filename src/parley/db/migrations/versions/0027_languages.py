"""an agent's languages (API.md section 18): the languages it also hears and speaks and its
multilingual mode; a conversation's heard languages

Revision ID: 0027
Revises: 0024
Create Date: 2026-12-08 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN with a constant default: no batch copy of a table on SQLite.
    op.add_column(
        "agents",
        sa.Column("additional_languages", sa.JSON(), nullable=False, server_default="[]"),
    )
    op.add_column("agents", sa.Column("multilingual_mode", sa.String(length=16), nullable=True))
    op.add_column(
        "conversations",
        sa.Column("heard_languages", sa.JSON(), nullable=False, server_default="[]"),
    )


def downgrade() -> None:
    op.drop_column("conversations", "heard_languages")
    op.drop_column("agents", "multilingual_mode")
    op.drop_column("agents", "additional_languages")
