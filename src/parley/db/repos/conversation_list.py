"""The API's conversation listing (API.md sections 5 and 17): filters and keyset pages.

One order, oldest first by (created_at, id); a page starts after a position (the `after`
conversation, or a `cursor`'s row) or ends before one (`before`). Every filter is an
indexed column of the organization's rows: `external_id`, `started_at`, `duration_ms`
(stored when the conversation ends), `project_id`, `agent_id`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import SelectT
from parley.db.repos.conversations import JOINED_COLUMNS, records_of, with_joined
from parley.db.tables import ConversationRow
from parley.ids import is_valid_conversation_id
from parley.records import Conversation

Position = tuple[datetime, str]
"""A row's place in the listing's order: its (created_at, id)."""


@dataclass(frozen=True, slots=True)
class ListFilters:
    """Which conversations a listing shows; None: no condition. Bounds are inclusive."""

    project_id: str | None = None
    agent_id: str | None = None
    only_ids: Sequence[str] | None = None
    external_id: str | None = None
    duration_min_ms: int | None = None
    duration_max_ms: int | None = None
    started_from: datetime | None = None
    started_until: datetime | None = None


async def position_of(session: AsyncSession, org_id: str, conversation_id: str) -> Position | None:
    """The position of the organization's conversation, or None when it has none such."""
    if not is_valid_conversation_id(conversation_id):
        return None
    created = await session.scalar(
        select(ConversationRow.created_at).where(
            ConversationRow.org_id == org_id, ConversationRow.id == conversation_id
        )
    )
    return None if created is None else (created, conversation_id)


async def page(
    session: AsyncSession,
    org_id: str,
    filters: ListFilters,
    *,
    after: Position | None,
    before: Position | None,
    limit: int,
) -> list[Conversation]:
    """Up to `limit` + 1 conversations that pass `filters`: oldest first after `after`
    (or from the start), or, given `before`, newest first from just before it (the caller
    turns that page around)."""
    query = _filtered(with_joined(select(ConversationRow, *JOINED_COLUMNS)), org_id, filters)
    created_at, row_id = ConversationRow.created_at, ConversationRow.id
    if before is not None:
        query = query.where(
            or_(created_at < before[0], and_(created_at == before[0], row_id < before[1]))
        ).order_by(created_at.desc(), row_id.desc())
    else:
        if after is not None:
            query = query.where(
                or_(created_at > after[0], and_(created_at == after[0], row_id > after[1]))
            )
        query = query.order_by(created_at, row_id)
    return await records_of(session, org_id, query.limit(limit + 1))


def _filtered(query: SelectT, org_id: str, filters: ListFilters) -> SelectT:
    conversation = ConversationRow
    query = query.where(conversation.org_id == org_id)
    if filters.project_id is not None:
        query = query.where(conversation.project_id == filters.project_id)
    if filters.agent_id is not None:
        query = query.where(conversation.agent_id == filters.agent_id)
    if filters.only_ids is not None:
        query = query.where(conversation.id.in_(filters.only_ids))
    if filters.external_id is not None:
        query = query.where(conversation.external_id == filters.external_id)
    if filters.duration_min_ms is not None:
        query = query.where(conversation.duration_ms >= filters.duration_min_ms)
    if filters.duration_max_ms is not None:
        query = query.where(conversation.duration_ms <= filters.duration_max_ms)
    if filters.started_from is not None:
        query = query.where(conversation.started_at >= filters.started_from)
    if filters.started_until is not None:
        query = query.where(conversation.started_at <= filters.started_until)
    return query
