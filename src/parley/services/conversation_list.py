"""Listing conversations (API.md sections 5 and 17): the official SDK's filters and pages.

Rules:
1. One order, oldest first by (created_at, id), as the listing always had (docs/decisions.md:
   the SDK's docs call the next page "older"; its cursors work the same either way).
2. Pages: `after` (a conversation ID: the page after it), `before` (the page before it) or
   `cursor` (the opaque `next_cursor` of section 5); at most one of them. An ID that names
   no conversation the caller may list is 400 `invalid_cursor`.
3. The answer's `pagination.next_cursor` is the last conversation's ID when more follow
   (pass it as `after`), `prev_cursor` the first one's when some come before (pass it as
   `before`); `next_cursor` stays section 5's opaque cursor of the same next page.
4. Filters: `external_id` (exact), `duration_min`/`duration_max` (seconds, of an ended
   conversation), `started_at_min`/`started_at_max` (an ISO 8601 date, which covers its
   whole UTC day, or a date and time with `Z` or an offset). Bounds are inclusive; a lower
   bound over its upper bound is 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

from parley.db.pagination import MAX_PAGE_SIZE, decode_cursor, encode_cursor
from parley.db.repos import conversation_list as list_repo
from parley.db.repos import projects as project_repo
from parley.db.repos.conversation_list import ListFilters, Position
from parley.db.session import Session
from parley.errors import InvalidCursor, ValidationFailed
from parley.records import Conversation
from parley.services import recordings
from parley.services.agents import find_agent
from parley.services.context import Context

__all__ = ["ConversationPage", "ListQuery", "list_conversations"]

MAX_DATE_LENGTH: Final = 40
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, slots=True)
class ListQuery:
    """A listing's parameters as the client sent them (rule 4's strings unparsed)."""

    project: str | None = None
    agent: str | None = None
    external_id: str | None = None
    duration_min: int | None = None
    duration_max: int | None = None
    started_at_min: str | None = None
    started_at_max: str | None = None
    before: str | None = None
    after: str | None = None
    cursor: str | None = None
    limit: int = MAX_PAGE_SIZE


@dataclass(frozen=True, slots=True)
class ConversationPage:
    """One page (rule 3): its conversations, oldest first, and the cursors around it."""

    items: list[Conversation]
    next_cursor: str | None
    """Section 5's opaque cursor of the next page (`cursor`)."""
    prev_id: str | None
    next_id: str | None
    """`pagination.prev_cursor` and `next_cursor`: IDs for `before` and `after`."""


async def list_conversations(
    ctx: Context, *, org_id: str, query: ListQuery, only_ids: frozenset[str] | None
) -> ConversationPage:
    """List the conversations `query` asks for; `only_ids` restricts a session token's view.

    `project` (a name or an ID) is resolved as the agent listing resolves it: 404 when the
    organization has no such project, 403 for another organization's project ID.
    """
    filters = _filters(query, only_ids)
    _one_cursor(query)
    async with ctx.db.read() as session:
        project = query.project
        if project:
            in_project = await project_repo.resolve(session, org_id, project)
            project = in_project.name
            filters = replace(filters, project_id=in_project.id)
        if query.agent is not None:
            agent = await find_agent(session, org_id, query.agent, project)
            filters = replace(filters, agent_id=agent.id)
        after, before = None, None
        if query.cursor is not None:
            after = decode_cursor(query.cursor)
        elif query.after is not None:
            after = await _position(session, org_id, "after", query.after, only_ids)
        elif query.before is not None:
            before = await _position(session, org_id, "before", query.before, only_ids)
        found = await list_repo.page(
            session, org_id, filters, after=after, before=before, limit=query.limit
        )
    page = _paged(found, limit=query.limit, backwards=before is not None, reached=after)
    return replace(page, items=await recordings.with_audio_urls(ctx, page.items))


def _paged(
    found: list[Conversation], *, limit: int, backwards: bool, reached: Position | None
) -> ConversationPage:
    more = len(found) > limit
    items = found[:limit]
    if backwards:
        items.reverse()
        earlier, later = more, bool(items)
    else:
        earlier, later = reached is not None and bool(items), more
    last = items[-1] if items else None
    return ConversationPage(
        items=items,
        next_cursor=encode_cursor(last.created_at, last.id) if later and last else None,
        prev_id=items[0].id if earlier else None,
        next_id=last.id if later and last else None,
    )


async def _position(
    session: Session, org_id: str, name: str, conversation_id: str, only: frozenset[str] | None
) -> Position:
    found = None
    if only is None or conversation_id in only:
        found = await list_repo.position_of(session, org_id, conversation_id)
    if found is None:
        raise InvalidCursor(param_errors={name: "names no conversation of this listing"})
    return found


def _one_cursor(query: ListQuery) -> None:
    if query.before is not None and query.after is not None:
        raise ValidationFailed(param_errors={"before": "cannot be used with after"})
    if query.cursor is not None and (query.before is not None or query.after is not None):
        raise ValidationFailed(param_errors={"cursor": "cannot be used with before or after"})


def _filters(query: ListQuery, only_ids: frozenset[str] | None) -> ListFilters:
    errors: dict[str, str] = {}
    started_from = _moment(query.started_at_min, "started_at_min", errors, end_of_day=False)
    started_until = _moment(query.started_at_max, "started_at_max", errors, end_of_day=True)
    if started_from and started_until and started_from > started_until:
        errors["started_at_min"] = "is later than started_at_max"
    low, high = query.duration_min, query.duration_max
    if low is not None and high is not None and low > high:
        errors["duration_min"] = "is more than duration_max"
    if errors:
        raise ValidationFailed(param_errors=errors)
    return ListFilters(
        only_ids=sorted(only_ids) if only_ids is not None else None,
        external_id=query.external_id,
        duration_min_ms=low * 1000 if low is not None else None,
        duration_max_ms=high * 1000 if high is not None else None,
        started_from=started_from,
        started_until=started_until,
    )


def _moment(
    value: str | None, name: str, errors: dict[str, str], *, end_of_day: bool
) -> datetime | None:
    """Rule 4's date or date and time, in UTC; a date alone is its first (or, as an upper
    bound, its last) microsecond."""
    if value is None:
        return None
    try:
        if len(value) > MAX_DATE_LENGTH:
            raise ValueError
        if _DATE_ONLY.fullmatch(value):
            day = datetime.combine(date.fromisoformat(value), time(), tzinfo=UTC)
            return day + timedelta(days=1, microseconds=-1) if end_of_day else day
        moment = datetime.fromisoformat(value)
    except ValueError:
        errors[name] = "must be an ISO 8601 date (2025-04-17) or date and time"
        return None
    if moment.utcoffset() is None:
        errors[name] = "must name its time zone (Z or an offset such as +02:00)"
        return None
    return moment.astimezone(UTC)
