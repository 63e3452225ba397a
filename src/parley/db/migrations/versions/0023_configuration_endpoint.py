"""an agent's configuration endpoint (API.md section 17): its URL, headers (values sealed),
time-out and signing secret (sealed), in one JSON column

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 11:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable): no batch copy of the table on SQLite.
    op.add_column("agents", sa.Column("configuration_endpoint", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("agents", "configuration_endpoint")
