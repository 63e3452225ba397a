"""the agents' silence settings: no_input_poke_sec, no_input_poke_text,
no_input_end_conversation_sec (API.md section 15); conversations.ended_by holds the longest
ended_by, `assistant_silence_limit_reached`

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 00:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, or a constant default): no batch copy of the table on
    # SQLite, whose drop would fire the ON DELETE actions of the tables that refer to agents.
    op.add_column("agents", sa.Column("no_input_poke_sec", sa.Integer(), nullable=True))
    op.add_column(
        "agents",
        sa.Column(
            "no_input_poke_text",
            sa.Text(),
            server_default="Are you still there?",
            nullable=False,
        ),
    )
    op.add_column("agents", sa.Column("no_input_end_conversation_sec", sa.Integer(), nullable=True))
    _set_ended_by_length(40)


def downgrade() -> None:
    _set_ended_by_length(16)
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("no_input_end_conversation_sec")
        batch_op.drop_column("no_input_poke_text")
        batch_op.drop_column("no_input_poke_sec")


def _set_ended_by_length(length: int) -> None:
    """Resize conversations.ended_by. On SQLite without a batch copy of conversations (the
    copy's drop would cascade to their items): a new column, the values copied, the old one
    dropped (SQLite 3.35+) and the new one renamed."""
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column(
            "conversations", "ended_by", type_=sa.String(length=length), existing_nullable=True
        )
        return
    op.add_column("conversations", sa.Column("ended_by_resized", sa.String(length), nullable=True))
    op.execute("UPDATE conversations SET ended_by_resized = ended_by")
    op.execute("ALTER TABLE conversations DROP COLUMN ended_by")
    op.execute("ALTER TABLE conversations RENAME COLUMN ended_by_resized TO ended_by")
