"""transfers (API.md section 15): the transfer tools' settings
(built_in_transfer_to_phone_number, built_in_transfer_to_agent), a conversation's phone
transfer under way, and the briefings a warm transfer's target hears

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07 00:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = (
    ("phone_number", sa.String(16)),
    ("dtmf", sa.String(32)),
    ("dynamic_dtmf", sa.Boolean()),
    ("use_agent_phone_number", sa.Boolean()),
    ("keep_listening", sa.Boolean()),
    ("post_transfer_message", sa.Text()),
    ("on_transfer_no_answer", sa.String(32)),
    ("detect_voicemail", sa.Boolean()),
    ("agents_to_transfer_to", sa.JSON()),
)


def upgrade() -> None:
    _set_type_length(40)  # `built_in_transfer_to_phone_number` is 33 characters
    # Plain ADD COLUMN (nullable): no batch copy of a table on SQLite.
    for name, kind in COLUMNS:
        op.add_column("tools", sa.Column(name, kind, nullable=True))
    op.add_column("conversations", sa.Column("transfer", sa.JSON(), nullable=True))
    op.add_column(
        "conversations", sa.Column("transfer_since", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_table(
        "briefings",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("voice_id", sa.String(length=100), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            name="fk_briefings_conversation",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_briefings")),
    )
    op.create_index("ix_briefings_conversation", "briefings", ["org_id", "conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_briefings_conversation", table_name="briefings")
    op.drop_table("briefings")
    op.drop_column("conversations", "transfer_since")
    op.drop_column("conversations", "transfer")
    for name, _ in reversed(COLUMNS):
        op.drop_column("tools", name)
    _set_type_length(32)


def _set_type_length(length: int) -> None:
    """Resize tools.type. On SQLite without a batch copy of tools (whose drop would cascade
    to nothing today, but would lose the table's rows' order and rebuild its indexes): a
    new column, the values copied, the old one dropped (SQLite 3.35+), the new one
    renamed."""
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column("tools", "type", type_=sa.String(length=length), existing_nullable=False)
        return
    # NOT NULL needs a default to be added; the copy below gives every row its value.
    op.add_column(
        "tools",
        sa.Column("type_resized", sa.String(length), nullable=False, server_default=""),
    )
    op.execute("UPDATE tools SET type_resized = type")
    op.execute("ALTER TABLE tools DROP COLUMN type")
    op.execute("ALTER TABLE tools RENAME COLUMN type_resized TO type")
