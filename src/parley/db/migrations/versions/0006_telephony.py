"""carrier accounts, stream tokens and conversations' call_info (phone calls, API.md 13)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 11:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "twilio_accounts",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("account_sid", sa.String(length=34), nullable=False),
        sa.Column("auth_token_sealed", sa.Text(), nullable=False),
        sa.Column("auth_token_last4", sa.String(length=4), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_twilio_accounts_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", name=op.f("pk_twilio_accounts")),
        sa.UniqueConstraint("account_sid", name=op.f("uq_twilio_accounts_account_sid")),
    )
    op.create_table(
        "stream_tokens",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            name="fk_stream_tokens_conversation",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_stream_tokens")),
    )
    op.create_index("ix_stream_tokens_conversation", "stream_tokens", ["org_id", "conversation_id"])
    op.create_index("ix_stream_tokens_expires_at", "stream_tokens", ["expires_at"])
    # Plain ADD COLUMN (nullable, no default): a batch copy on SQLite would drop and
    # recreate `conversations`, firing the ON DELETE actions of the tables referring to it.
    for column in ("from_phone_number", "to_phone_number", "twilio_call_sid"):
        op.add_column("conversations", sa.Column(column, sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("twilio_call_sid")
        batch_op.drop_column("to_phone_number")
        batch_op.drop_column("from_phone_number")
    op.drop_index("ix_stream_tokens_expires_at", table_name="stream_tokens")
    op.drop_index("ix_stream_tokens_conversation", table_name="stream_tokens")
    op.drop_table("stream_tokens")
    op.drop_table("twilio_accounts")
