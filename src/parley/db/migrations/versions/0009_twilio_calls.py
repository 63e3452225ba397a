"""one answer per CallSid: the calls the voice webhook answered, and stream tokens sealed

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 23:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "twilio_calls",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("call_sid", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=128), nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_twilio_calls_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "call_sid", name=op.f("pk_twilio_calls")),
    )
    # The calls answered before this revision, so that their repeats are refused too: one
    # conversation of each CallSid (replays may have made several; they stay as they are).
    # Their tokens were not kept sealed, so a repeat gets <Reject/> (docs/decisions.md).
    op.execute(
        """
        INSERT INTO twilio_calls (org_id, call_sid, conversation_id, answered_at)
        SELECT c.org_id, c.twilio_call_sid, MIN(c.id), MIN(c.created_at)
        FROM conversations AS c
        WHERE c.twilio_call_sid IS NOT NULL
        GROUP BY c.org_id, c.twilio_call_sid
        """
    )
    # Plain ADD COLUMN (nullable, no default): no batch copy of the table on SQLite.
    op.add_column("stream_tokens", sa.Column("token_sealed", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stream_tokens", schema=None) as batch_op:
        batch_op.drop_column("token_sealed")
    op.drop_table("twilio_calls")
