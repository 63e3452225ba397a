"""an agent's delivery (API.md section 17): the generated welcome, its interruptibility,
the speed of its voice, its time zone, its pronunciation dictionary and its VAD settings,
as one JSON object

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 10:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN, nullable (NULL: every member's default): no batch copy on SQLite.
    op.add_column("agents", sa.Column("delivery", sa.JSON(), nullable=True))
    # The agent's version, counted by each update (the SDK's `version_number`).
    op.add_column(
        "agents", sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False)
    )


def downgrade() -> None:
    op.drop_column("agents", "version")
    op.drop_column("agents", "delivery")
