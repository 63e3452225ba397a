"""instance leases, durable jti claims, pending revocations

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instances",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instances")),
    )
    op.create_table(
        "jti_claims",
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_jti_claims")),
    )
    with op.batch_alter_table("jti_claims", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jti_claims_expires_at"), ["expires_at"], unique=False)
    op.create_table(
        "pending_revocations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("credential_id", sa.String(length=512), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_revocations")),
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("instance_id", sa.String(length=128), nullable=True))
        batch_op.create_index(
            "ix_conversations_status_instance_id", ["status", "instance_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_index("ix_conversations_status_instance_id")
        batch_op.drop_column("instance_id")
    op.drop_table("pending_revocations")
    with op.batch_alter_table("jti_claims", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jti_claims_expires_at"))
    op.drop_table("jti_claims")
    op.drop_table("instances")
