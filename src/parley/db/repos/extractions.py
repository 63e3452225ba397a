"""Extractions made from conversations (API.md section 16)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import ConversationExtractionRow, ExtractionSchemaRow
from parley.records import Extraction


async def insert(
    session: AsyncSession,
    *,
    extraction_id: str,
    org_id: str,
    conversation_id: str,
    schema_id: str,
    schema_name: str,
    result: Mapping[str, Any],
    now: datetime,
) -> Extraction:
    """Store an extraction (the conversation's row is the caller's to lock and check)."""
    row = ConversationExtractionRow(
        id=extraction_id,
        org_id=org_id,
        conversation_id=conversation_id,
        schema_id=schema_id,
        schema_name=schema_name,
        result=dict(result),
        created_at=now,
    )
    session.add(row)
    await session.flush()
    return _record(row, schema_deleted=False)


async def list_page(
    session: AsyncSession,
    org_id: str,
    conversation_id: str,
    *,
    cursor: str | None,
    limit: int,
) -> list[Extraction]:
    """A conversation's extractions, oldest first, each saying whether its schema is gone."""
    query = (
        select(ConversationExtractionRow, ExtractionSchemaRow.id.label("schema_row"))
        .outerjoin(
            ExtractionSchemaRow, ExtractionSchemaRow.id == ConversationExtractionRow.schema_id
        )
        .where(
            ConversationExtractionRow.org_id == org_id,
            ConversationExtractionRow.conversation_id == conversation_id,
        )
    )
    query = paginate(
        query,
        created_at=ConversationExtractionRow.created_at,
        row_id=ConversationExtractionRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [
        _record(row, schema_deleted=schema_row is None)
        for row, schema_row in await session.execute(query)
    ]


def _record(row: ConversationExtractionRow, *, schema_deleted: bool) -> Extraction:
    return Extraction(
        id=row.id,
        conversation_id=row.conversation_id,
        schema_id=row.schema_id,
        schema_name=row.schema_name,
        result=dict(row.result),
        created_at=row.created_at,
        schema_deleted=schema_deleted,
    )
