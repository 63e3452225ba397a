"""agent test runs (API.md section 19): scenarios, queued runs, and the marks a test
conversation carries (its run, its tool overrides)

Revision ID: 0028
Revises: 0024
Create Date: 2026-12-07 14:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "test_scenarios",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_test_scenarios_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_test_scenarios_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_test_scenarios")),
        sa.UniqueConstraint("project_id", "name", name="uq_test_scenarios_project_id_name"),
    )
    op.create_index(
        "ix_test_scenarios_org_id_created_at", "test_scenarios", ["org_id", "created_at"]
    )
    op.create_table(
        "test_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("scenarios", sa.JSON(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("server_url", sa.String(length=300), nullable=False),
        sa.Column("claimed_by", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_test_runs_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_test_runs_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_test_runs")),
    )
    op.create_index("ix_test_runs_status_created_at", "test_runs", ["status", "created_at"])
    # Plain ADD COLUMN (nullable): no batch copy of a table on SQLite.
    op.add_column("conversations", sa.Column("test_run_id", sa.String(length=40), nullable=True))
    op.add_column("conversations", sa.Column("tool_overrides", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("conversations", "tool_overrides")
    op.drop_column("conversations", "test_run_id")
    op.drop_index("ix_test_runs_status_created_at", table_name="test_runs")
    op.drop_table("test_runs")
    op.drop_index("ix_test_scenarios_org_id_created_at", table_name="test_scenarios")
    op.drop_table("test_scenarios")
