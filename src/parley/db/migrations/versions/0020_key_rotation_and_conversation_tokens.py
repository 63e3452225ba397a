"""API key rotation and conversation tokens (API.md section 17): the secrets a rotation
replaced, working until their grace ends, and single-use conversation tokens

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 10:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_key_grace_secrets",
        sa.Column("secret_hash", sa.String(64), primary_key=True),
        sa.Column(
            "key_id",
            sa.String(40),
            sa.ForeignKey("api_keys.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("last4", sa.String(4), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_api_key_grace_secrets_key_id", "api_key_grace_secrets", ["key_id"])
    op.create_index(
        "ix_api_key_grace_secrets_valid_until", "api_key_grace_secrets", ["valid_until"]
    )
    op.create_table(
        "conversation_tokens",
        sa.Column("secret_hash", sa.String(64), primary_key=True),
        sa.Column(
            "org_id",
            sa.String(40),
            sa.ForeignKey("organizations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "agent_id",
            sa.String(40),
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_conversation_tokens_expires_at", "conversation_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_conversation_tokens_expires_at", table_name="conversation_tokens")
    op.drop_table("conversation_tokens")
    op.drop_index("ix_api_key_grace_secrets_valid_until", table_name="api_key_grace_secrets")
    op.drop_index("ix_api_key_grace_secrets_key_id", table_name="api_key_grace_secrets")
    op.drop_table("api_key_grace_secrets")
