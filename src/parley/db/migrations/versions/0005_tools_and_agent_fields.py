"""tools, agent tool/template/keyword fields, conversation project IDs and tool calls

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

EMPTY_LIST = "[]"
EMPTY_OBJECT = "{}"


def upgrade() -> None:
    op.create_table(
        "tools",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("execution_mode", sa.String(length=8), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("parameter_locations", sa.JSON(), nullable=True),
        sa.Column("endpoint_method", sa.String(length=8), nullable=True),
        sa.Column("endpoint_url", sa.String(length=2048), nullable=True),
        sa.Column("endpoint_headers", sa.JSON(), nullable=True),
        sa.Column("endpoint_timeout_ms", sa.Integer(), nullable=True),
        sa.Column("tool_call_output_timeout_ms", sa.Integer(), nullable=True),
        sa.Column("require_speech_before_tool_call", sa.Boolean(), nullable=False),
        sa.Column("signing_secret_sealed", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_tools_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_tools_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tools")),
        sa.UniqueConstraint("project_id", "name", name="uq_tools_project_id_name"),
    )
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.create_index("ix_tools_org_id_created_at", ["org_id", "created_at"], unique=False)
    # Plain ADD COLUMN with constant defaults: on SQLite, a batch copy would drop and
    # recreate these tables, and the drop would fire the ON DELETE actions of the tables
    # that refer to them (items, phone numbers, conversations' agents).
    op.add_column(
        "agents", sa.Column("tools", sa.JSON(), server_default=EMPTY_LIST, nullable=False)
    )
    op.add_column(
        "agents",
        sa.Column("template_variables", sa.JSON(), server_default=EMPTY_OBJECT, nullable=False),
    )
    op.add_column(
        "agents",
        sa.Column("boosted_keywords", sa.JSON(), server_default=EMPTY_LIST, nullable=False),
    )
    op.add_column("conversations", sa.Column("project_id", sa.String(length=40), nullable=True))
    op.add_column(
        "conversations",
        sa.Column("template_variables", sa.JSON(), server_default=EMPTY_OBJECT, nullable=False),
    )
    op.add_column(
        "conversation_items",
        sa.Column("tool_calls", sa.JSON(), server_default=EMPTY_LIST, nullable=False),
    )
    # Conversations stored their project's name only: find its ID by that name.
    op.execute(
        "UPDATE conversations SET project_id = (SELECT projects.id FROM projects"
        " WHERE projects.org_id = conversations.org_id"
        " AND projects.name = conversations.project_name)"
        " WHERE project_name IS NOT NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("conversation_items", schema=None) as batch_op:
        batch_op.drop_column("tool_calls")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("template_variables")
        batch_op.drop_column("project_id")
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("boosted_keywords")
        batch_op.drop_column("template_variables")
        batch_op.drop_column("tools")
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.drop_index("ix_tools_org_id_created_at")
    op.drop_table("tools")
