"""outbound calls (API.md section 15): a call's direction, the settings an outbound call was
placed with, the carrier's answering-machine verdict; agents.voicemail_message

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 00:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable): no batch copy of a table on SQLite, whose drop would fire
    # the ON DELETE actions of the tables that refer to it.
    op.add_column("agents", sa.Column("voicemail_message", sa.Text(), nullable=True))
    op.add_column("conversations", sa.Column("call_direction", sa.String(16), nullable=True))
    op.add_column("conversations", sa.Column("call_settings", sa.JSON(), nullable=True))
    op.add_column("conversations", sa.Column("answered_by", sa.String(32), nullable=True))
    # Every call stored so far was answered: inbound.
    op.execute(
        "UPDATE conversations SET call_direction = 'inbound' "
        "WHERE twilio_call_sid IS NOT NULL OR to_phone_number IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_column("conversations", "answered_by")
    op.drop_column("conversations", "call_settings")
    op.drop_column("conversations", "call_direction")
    op.drop_column("agents", "voicemail_message")
