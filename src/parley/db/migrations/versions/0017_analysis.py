"""analysis (API.md section 16): extraction schemas and the extractions made with them,
evaluation prompts and the evaluations made with them, a conversation's summary, and the
schemas and prompts an agent runs after each call

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-10 06:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

EMPTY_LIST = "[]"


def upgrade() -> None:
    # Plain ADD COLUMN (constant defaults, or nullable): no batch copy of a table on SQLite,
    # whose drop would fire the ON DELETE actions of the tables that refer to it.
    op.add_column(
        "agents",
        sa.Column("extraction_schemas", sa.JSON(), server_default=EMPTY_LIST, nullable=False),
    )
    op.add_column(
        "agents", sa.Column("eval_prompts", sa.JSON(), server_default=EMPTY_LIST, nullable=False)
    )
    op.add_column("conversations", sa.Column("summary", sa.Text(), nullable=True))
    op.create_table(
        "extraction_schemas",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_extraction_schemas_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_extraction_schemas_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_extraction_schemas")),
        sa.UniqueConstraint("project_id", "name", name="uq_extraction_schemas_project_id_name"),
    )
    op.create_index(
        "ix_extraction_schemas_org_id_created_at", "extraction_schemas", ["org_id", "created_at"]
    )
    op.create_table(
        "conversation_extractions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=128), nullable=False),
        sa.Column("schema_id", sa.String(length=40), nullable=False),
        sa.Column("schema_name", sa.String(length=100), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            name="fk_conversation_extractions_conversation",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversation_extractions")),
    )
    op.create_index(
        "ix_conversation_extractions_conversation",
        "conversation_extractions",
        ["org_id", "conversation_id", "created_at"],
    )
    op.create_table(
        "conversation_eval_prompts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_conversation_eval_prompts_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_conversation_eval_prompts_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversation_eval_prompts")),
        sa.UniqueConstraint(
            "project_id", "name", name="uq_conversation_eval_prompts_project_id_name"
        ),
    )
    op.create_index(
        "ix_conversation_eval_prompts_org_id_created_at",
        "conversation_eval_prompts",
        ["org_id", "created_at"],
    )
    op.create_table(
        "conversation_evaluations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=128), nullable=False),
        sa.Column("prompt_id", sa.String(length=40), nullable=False),
        sa.Column("prompt_name", sa.String(length=100), nullable=False),
        sa.Column("result", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            name="fk_conversation_evaluations_conversation",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversation_evaluations")),
    )
    op.create_index(
        "ix_conversation_evaluations_conversation",
        "conversation_evaluations",
        ["org_id", "conversation_id", "created_at"],
    )
    op.create_index(
        "ix_conversation_evaluations_prompt_id", "conversation_evaluations", ["prompt_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_conversation_evaluations_prompt_id", table_name="conversation_evaluations")
    op.drop_index("ix_conversation_evaluations_conversation", table_name="conversation_evaluations")
    op.drop_table("conversation_evaluations")
    op.drop_index(
        "ix_conversation_eval_prompts_org_id_created_at", table_name="conversation_eval_prompts"
    )
    op.drop_table("conversation_eval_prompts")
    op.drop_index("ix_conversation_extractions_conversation", table_name="conversation_extractions")
    op.drop_table("conversation_extractions")
    op.drop_index("ix_extraction_schemas_org_id_created_at", table_name="extraction_schemas")
    op.drop_table("extraction_schemas")
    op.drop_column("conversations", "summary")
    op.drop_column("agents", "eval_prompts")
    op.drop_column("agents", "extraction_schemas")
