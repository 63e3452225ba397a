"""Conversations (API.md section 5): IDs unique within an organization, chosen by the
customer or made by the service; a disabled agent starts none (spec section 3, rule 1)."""

from __future__ import annotations

import re

from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import projects as project_repo
from parley.db.tables import ConversationRow
from parley.errors import (
    AgentDisabled,
    AgentNotFound,
    ConversationExists,
    ConversationNotFound,
    ProjectNotFound,
    ValidationFailed,
)
from parley.ids import looks_like_id, new_id
from parley.records import Conversation
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT

CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
CONVERSATION_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_', ':', '@' and '-', "
    "starting with a letter or digit"
)


def check_conversation_id(conversation_id: str) -> str:
    """Refuse a customer-chosen conversation ID of the wrong shape (400)."""
    if not CONVERSATION_ID.fullmatch(conversation_id):
        raise ValidationFailed(param_errors={"id": CONVERSATION_ID_RULE})
    return conversation_id


async def create_conversation(
    ctx: Context,
    *,
    org_id: str,
    agent: str,
    project: str | None,
    conversation_id: str | None,
) -> Conversation:
    """Create a `pending` conversation with an agent; 409 if the agent is disabled."""
    if conversation_id is not None:
        check_conversation_id(conversation_id)
    async with ctx.db.transaction(conversation_repo.UNIQUE_VIOLATIONS) as session:
        project_row = None
        if not looks_like_id(agent, "agent"):
            try:
                project_row = await project_repo.resolve(session, org_id, project or MAIN_PROJECT)
            except ProjectNotFound:
                raise AgentNotFound() from None
        agent_row = await agent_repo.find(session, org_id, agent, project=project_row)
        if agent_row.disabled_at is not None:
            raise AgentDisabled("The agent is disabled: it cannot start conversations.")
        new = conversation_id or new_id("conv")
        if await conversation_repo.get_row(session, org_id, new) is not None:
            raise ConversationExists()
        agent_record = await agent_repo.load(session, agent_row)
        row = ConversationRow(
            org_id=org_id,
            id=new,
            agent_id=agent_row.id,
            project_name=agent_record.project,
            status="pending",
            end_user=None,
            external_id=None,
            started_at=None,
            ended_at=None,
            created_at=utcnow(ctx.clock),
        )
        await conversation_repo.insert(session, row)
        return await conversation_repo.load(session, row)


async def get_conversation(ctx: Context, *, org_id: str, conversation_id: str) -> Conversation:
    """Return a conversation of the organization, with its items."""
    async with ctx.db.transaction() as session:
        row = await conversation_repo.get_row(session, org_id, conversation_id)
        if row is None:
            raise ConversationNotFound()
        return await conversation_repo.load(session, row)
