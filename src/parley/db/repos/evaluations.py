"""Evaluations of conversations (API.md section 16)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import ConversationEvaluationRow, EvalPromptRow
from parley.records import Evaluation


async def insert(
    session: AsyncSession,
    *,
    evaluation_id: str,
    org_id: str,
    conversation_id: str,
    prompt_id: str,
    prompt_name: str,
    result: str,
    now: datetime,
) -> Evaluation:
    """Store an evaluation's verdict."""
    row = ConversationEvaluationRow(
        id=evaluation_id,
        org_id=org_id,
        conversation_id=conversation_id,
        prompt_id=prompt_id,
        prompt_name=prompt_name,
        result=result,
        created_at=now,
    )
    session.add(row)
    await session.flush()
    return _record(row)


async def of_conversation(
    session: AsyncSession,
    org_id: str,
    conversation_id: str,
    *,
    cursor: str | None,
    limit: int,
) -> list[Evaluation]:
    """A conversation's evaluations, oldest first."""
    query = select(ConversationEvaluationRow).where(
        ConversationEvaluationRow.org_id == org_id,
        ConversationEvaluationRow.conversation_id == conversation_id,
    )
    return await _page(session, query, cursor=cursor, limit=limit)


async def of_project(
    session: AsyncSession, org_id: str, project_id: str, *, cursor: str | None, limit: int
) -> list[Evaluation]:
    """The evaluations made with a project's prompts, oldest first."""
    query = (
        select(ConversationEvaluationRow)
        .join(EvalPromptRow, EvalPromptRow.id == ConversationEvaluationRow.prompt_id)
        .where(ConversationEvaluationRow.org_id == org_id, EvalPromptRow.project_id == project_id)
    )
    return await _page(session, query, cursor=cursor, limit=limit)


async def _page(
    session: AsyncSession, query: Any, *, cursor: str | None, limit: int
) -> list[Evaluation]:
    query = paginate(
        query,
        created_at=ConversationEvaluationRow.created_at,
        row_id=ConversationEvaluationRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [_record(row) for row in await session.scalars(query)]


def _record(row: ConversationEvaluationRow) -> Evaluation:
    return Evaluation(
        id=row.id,
        conversation_id=row.conversation_id,
        prompt_id=row.prompt_id,
        prompt_name=row.prompt_name,
        result=row.result,
        created_at=row.created_at,
    )
