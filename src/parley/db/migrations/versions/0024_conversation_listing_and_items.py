"""conversations as the official SDK reads them (API.md section 17): item IDs, a stored
duration and the replayed conversation, and the indexes of the list's filters

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 10:40:00.000000
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

BATCH = 1_000


def upgrade() -> None:
    # Plain ADD COLUMN (nullable): no batch copy of a table on SQLite.
    op.add_column("conversation_items", sa.Column("item_id", sa.String(length=40), nullable=True))
    op.add_column("conversations", sa.Column("duration_ms", sa.Integer(), nullable=True))
    op.add_column("conversations", sa.Column("replay_of", sa.String(length=128), nullable=True))
    _backfill_item_ids()
    _backfill_durations()
    op.create_index("ix_conversation_items_item_id", "conversation_items", ["item_id"], unique=True)
    op.create_index(
        "ix_conversations_org_id_external_id", "conversations", ["org_id", "external_id"]
    )
    op.create_index("ix_conversations_org_id_started_at", "conversations", ["org_id", "started_at"])
    op.create_index(
        "ix_conversations_org_id_duration_ms", "conversations", ["org_id", "duration_ms"]
    )


def _backfill_item_ids() -> None:
    """Give every stored item an ID (random, as new ones get), a batch at a time."""
    bind = op.get_bind()
    items = sa.table("conversation_items", sa.column("id"), sa.column("item_id"))
    while True:
        rows = bind.execute(
            sa.select(items.c.id).where(items.c.item_id.is_(None)).limit(BATCH)
        ).all()
        if not rows:
            return
        bind.execute(
            items.update()
            .where(items.c.id == sa.bindparam("row_id"))
            .values(item_id=sa.bindparam("new_item_id")),
            [{"row_id": row.id, "new_item_id": f"item_{secrets.token_hex(16)}"} for row in rows],
        )


def _backfill_durations() -> None:
    """The ended conversations' milliseconds from start to end (records.Conversation's
    `duration_ms`), in the database's own date arithmetic."""
    if op.get_bind().dialect.name == "postgresql":
        elapsed = "ROUND(EXTRACT(EPOCH FROM (ended_at - started_at)) * 1000)"
    else:
        elapsed = "ROUND((julianday(ended_at) - julianday(started_at)) * 86400000)"
    op.execute(
        f"UPDATE conversations SET duration_ms = {elapsed} "  # noqa: S608 (constant text)
        "WHERE started_at IS NOT NULL AND ended_at IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_conversations_org_id_duration_ms", table_name="conversations")
    op.drop_index("ix_conversations_org_id_started_at", table_name="conversations")
    op.drop_index("ix_conversations_org_id_external_id", table_name="conversations")
    op.drop_index("ix_conversation_items_item_id", table_name="conversation_items")
    op.drop_column("conversations", "replay_of")
    op.drop_column("conversations", "duration_ms")
    op.drop_column("conversation_items", "item_id")
