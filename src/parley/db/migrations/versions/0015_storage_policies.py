"""external storage policies (API.md section 16): S3-compatible buckets of a project, their
credentials sealed, and the policy an agent names

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-10 06:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "external_storage_policies",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("endpoint_url", sa.String(length=2048), nullable=False),
        sa.Column("bucket", sa.String(length=63), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=True),
        sa.Column("key_prefix", sa.String(length=512), nullable=True),
        sa.Column("addressing_style", sa.String(length=8), nullable=False),
        sa.Column("access_key_id_sealed", sa.Text(), nullable=False),
        sa.Column("secret_access_key_sealed", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_external_storage_policies_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_external_storage_policies_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_external_storage_policies")),
        sa.UniqueConstraint(
            "project_id", "name", name="uq_external_storage_policies_project_id_name"
        ),
    )
    op.create_index(
        "ix_external_storage_policies_org_id_created_at",
        "external_storage_policies",
        ["org_id", "created_at"],
    )
    # Plain ADD COLUMN (nullable, no foreign key): no batch copy of the agents table on
    # SQLite, whose drop would fire the ON DELETE actions of the tables that refer to it.
    op.add_column(
        "agents", sa.Column("external_storage_policy_id", sa.String(length=40), nullable=True)
    )
    op.create_index(
        "ix_agents_external_storage_policy_id", "agents", ["external_storage_policy_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_agents_external_storage_policy_id", table_name="agents")
    op.drop_column("agents", "external_storage_policy_id")
    op.drop_index(
        "ix_external_storage_policies_org_id_created_at", table_name="external_storage_policies"
    )
    op.drop_table("external_storage_policies")
