"""workspace (API.md section 17): a project's default agent and cap on active
conversations; the organization's cap, IP allowlist, invite domains and logo

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 10:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, or a constant default): no batch copy of a table on SQLite.
    # `default_agent_id` has no foreign key: reads join it to agents, so a deleted agent
    # reads as no default (an ID is never reused).
    op.add_column("projects", sa.Column("default_agent_id", sa.String(40), nullable=True))
    op.add_column("projects", sa.Column("max_active_conversations", sa.Integer(), nullable=True))
    op.add_column(
        "organizations", sa.Column("max_active_conversations", sa.Integer(), nullable=True)
    )
    op.add_column(
        "organizations",
        sa.Column("ip_allowlist", sa.JSON(), nullable=False, server_default="[]"),
    )
    op.add_column(
        "organizations",
        sa.Column("invite_link_allowed_domains", sa.JSON(), nullable=False, server_default="[]"),
    )
    op.add_column("organizations", sa.Column("logo_url", sa.String(2048), nullable=True))


def downgrade() -> None:
    op.drop_column("organizations", "logo_url")
    op.drop_column("organizations", "invite_link_allowed_domains")
    op.drop_column("organizations", "ip_allowlist")
    op.drop_column("organizations", "max_active_conversations")
    op.drop_column("projects", "max_active_conversations")
    op.drop_column("projects", "default_agent_id")
