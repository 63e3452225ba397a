"""Conversations (API.md section 5): IDs unique within an organization, chosen by the
customer or made by the service; a disabled agent starts none (spec section 3, rule 1).

A conversation going live is announced to the organization's webhooks
(conversation.started) in the transaction of the change (services/events.py); every ending,
with its conversation.ended, is services/endings.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parley import metrics
from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import conversations as conversation_repo
from parley.errors import (
    AgentDisabled,
    ConversationEnded,
    ConversationExists,
    ConversationNotFound,
    ConversationNotStarted,
    NotFound,
    ValidationFailed,
)
from parley.ids import CONVERSATION_ID_RULE, is_valid_conversation_id, new_id
from parley.records import Actor, Agent, Conversation, Page, RetentionPolicy, Status, ToolCall
from parley.services import active_conversations, conversation_list, endings, events, recordings
from parley.services.agents import find_agent
from parley.services.context import Context
from parley.services.conversation_list import ListQuery
from parley.services.event_payloads import conversation_event_data


def check_conversation_id(conversation_id: str, *, field: str = "id") -> str:
    """Refuse a customer-chosen conversation ID of the wrong shape (400, under `field`)."""
    if not is_valid_conversation_id(conversation_id):
        raise ValidationFailed(param_errors={field: CONVERSATION_ID_RULE})
    return conversation_id


async def create_conversation(
    ctx: Context,
    *,
    org_id: str,
    agent: str,
    project: str | None,
    conversation_id: str | None,
    replay_of: str | None = None,
    test_run_id: str | None = None,
    tool_overrides: Mapping[str, Any] | None = None,
) -> Conversation:
    """Create a `pending` conversation with an agent; 409 if the agent is disabled.
    `replay_of`: the conversation whose recording it replays (`conversations.replay`);
    `test_run_id` and `tool_overrides`: a test run's caller holds it (API.md section 19)."""
    if conversation_id is not None:
        check_conversation_id(conversation_id)
    async with ctx.db.transaction(conversation_repo.UNIQUE_VIOLATIONS) as session:
        # The agent's row lock orders this create against a disable (API.md section 4:
        # disable wins every race): one waiting on the lock sees the disable and answers 409.
        found = await find_agent(session, org_id, agent, project, for_update=True)
        if found.disabled_at is not None:
            raise AgentDisabled("The agent is disabled: it cannot start conversations.")
        new = conversation_id or new_id("conv")
        if await conversation_repo.find(session, org_id, new) is not None:
            raise ConversationExists()
        agent_record = await agent_repo.load(session, found.id)
        created = await conversation_repo.create(
            session,
            org_id=org_id,
            conversation_id=new,
            agent_id=found.id,
            project=agent_record.project,
            at=utcnow(ctx.clock),
            replay_of=replay_of,
            test_run_id=test_run_id,
            tool_overrides=tool_overrides,
        )
        return await conversation_repo.load(session, created)


async def get_conversation(
    ctx: Context, *, org_id: str, conversation_id: str, by_jwt: bool = False
) -> Conversation:
    """Return a conversation of the organization, with its items.

    `by_jwt`: the caller holds a JWT, whose conversation does not exist until its first
    WebSocket; the 404 then says so (ConversationNotStarted).
    """
    async with ctx.db.point_read() as connection:  # in the loop's thread on SQLite...
        found, whole = await conversation_repo.get_short(connection, org_id, conversation_id)
    if not whole:  # ...unless its items would hold the loop for milliseconds
        async with ctx.db.statement() as connection:
            found = await conversation_repo.get(connection, org_id, conversation_id)
    if found is None:
        raise ConversationNotStarted() if by_jwt else ConversationNotFound()
    return (await recordings.with_audio_urls(ctx, [found]))[0]


async def list_conversations(
    ctx: Context,
    *,
    org_id: str,
    project: str | None,
    agent: str | None,
    only_ids: frozenset[str] | None,
    cursor: str | None,
    limit: int,
) -> Page[Conversation]:
    """List conversations, oldest first, by section 5's parameters alone (the API's full
    listing, with the SDK's filters, is services/conversation_list.py)."""
    query = ListQuery(project=project, agent=agent, cursor=cursor, limit=limit)
    page = await conversation_list.list_conversations(
        ctx, org_id=org_id, query=query, only_ids=only_ids
    )
    return Page(items=page.items, next_cursor=page.next_cursor)


async def end_conversation(
    ctx: Context, *, org_id: str, conversation_id: str, actor: Actor
) -> None:
    """End a conversation (idempotent, audited); its live WebSocket closes with 1000."""
    await endings.end_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id, ending=endings.API, actor=actor
    )


async def start_live(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str | None,
    create_if_missing: bool,
    agent: str,
    project: str | None,
    end_user: str | None,
    retention: RetentionPolicy | None = None,
    redact: bool | None = None,
) -> tuple[Conversation, Agent]:
    """Bind a conversation to its agent and make it live (the WebSocket's `config`), with
    the `retention` policy and the redaction (`redact`) the config names (None: the
    agent's).

    With `create_if_missing` (a JWT's conversation), an unknown ID is created; otherwise
    `conversation_id` must name a `pending` conversation, or be None for a new one.
    Raises AgentDisabled for a disabled agent (spec section 3, rule 1), and
    TooManyActiveConversations past a cap (services/active_conversations.py).
    """
    now = utcnow(ctx.clock)
    async with (
        active_conversations.starting(ctx) as start,
        ctx.db.transaction(conversation_repo.UNIQUE_VIOLATIONS) as session,
    ):
        found = await find_agent(session, org_id, agent, project, for_update=True)
        if found.disabled_at is not None:
            raise AgentDisabled("The agent is disabled: it cannot start conversations.")
        agent_record = await agent_repo.load(session, found.id)
        state = None
        if conversation_id is not None:
            state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
            if state is None and not create_if_missing:
                raise ConversationNotFound()
        if state is None:
            state = await conversation_repo.create(
                session,
                org_id=org_id,
                conversation_id=conversation_id or new_id("conv"),
                agent_id=agent_record.id,
                project=agent_record.project,
                at=now,
            )
        else:
            if state.status == Status.ENDED:
                raise ConversationEnded()
            if state.status == Status.LIVE:  # one socket per conversation, whatever opened it
                raise ConversationExists("The conversation is already live.")
            if state.agent_id not in (None, agent_record.id):
                raise ValidationFailed(param_errors={"agent": "is not the conversation's agent"})
        # Counted active under the caps (API.md section 17), or refused: the last check.
        await start.take(
            session, org_id=org_id, project_id=agent_record.project.id, conversation_id=state.id
        )
        # This instance's lease now covers the conversation (services/instances.py).
        state = await conversation_repo.go_live(
            session,
            state,
            agent_id=agent_record.id,
            project=agent_record.project,
            instance_id=ctx.instance.id,
            end_user=end_user,
            at=now,
            retention=retention or agent_record.data_retention_policy,
            redacted=agent_record.enable_redaction if redact is None else redact,
        )
        live = await conversation_repo.load(session, state), agent_record
        started = live[0]

        async def data() -> dict[str, object]:
            return conversation_event_data(started)

        await events.emit(session, ctx, org_id=org_id, event_type="conversation.started", data=data)
    metrics.conversation_went_live()
    return live


async def resume_live(
    ctx: Context, *, org_id: str, conversation_id: str
) -> tuple[Conversation, Agent]:
    """Go on with a live call whose transfer was not answered, on this instance (services/
    transfers.py rule 4): no `conversation.started`, the agent it had. Raises
    ConversationEnded when it is no longer waiting for its caller."""
    now = utcnow(ctx.clock)
    async with active_conversations.starting(ctx) as start, ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is None:
            raise ConversationNotFound()
        if state.status != Status.LIVE or (state.transfer or {}).get("state") != "returning":
            raise ConversationEnded()
        if state.agent_id is None:
            raise ConversationEnded("The conversation's agent was deleted.")
        agent_record = await agent_repo.load(session, state.agent_id)
        # Counted already: the lease is renewed here, by the instance that serves it now.
        await start.take(
            session, org_id=org_id, project_id=agent_record.project.id, conversation_id=state.id
        )
        state = await conversation_repo.go_live(
            session,
            state,
            agent_id=agent_record.id,
            project=agent_record.project,
            instance_id=ctx.instance.id,
            end_user=None,
            at=now,
        )
        state = await conversation_repo.set_transfer(session, state, None, at=now)
        resumed = await conversation_repo.load(session, state), agent_record
    metrics.conversation_went_live()  # its stream before the transfer counted as ended
    return resumed


async def check_can_open(
    ctx: Context, *, org_id: str, conversation_id: str, missing_ok: bool = False
) -> None:
    """Refuse a handshake for a conversation that has ended, or that does not exist (unless
    `missing_ok`: a JWT's conversation is created by its first socket)."""
    async with ctx.db.point_read() as connection:  # by key, in the loop's thread on SQLite
        status = await conversation_repo.status_of(connection, org_id, conversation_id)
    if status is None:
        if missing_ok:
            return
        raise ConversationNotFound()
    if status == Status.ENDED:
        raise ConversationEnded()


async def add_item(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    role: str,
    text: str,
    tool_calls: Sequence[ToolCall] = (),
) -> str:
    """Store one item of the conversation: an utterance and the tool calls of its turn;
    return its ID.

    An item with tool calls is stored even when its text is empty (a reply cut short before
    any word was heard, API.md section 12).
    """
    async with ctx.db.transaction() as session:
        return await conversation_repo.add_item(
            session,
            org_id=org_id,
            conversation_id=conversation_id,
            role=role,
            text=text,
            tool_calls=tool_calls,
            at=utcnow(ctx.clock),
        )


async def update_tool_call_output(
    ctx: Context, *, org_id: str, conversation_id: str, tool_call: ToolCall
) -> None:
    """Replace the stored call with `tool_call.id` by `tool_call` (an async tool's output
    arriving after its item was stored). Raises NotFound when no stored item holds it."""
    async with ctx.db.transaction() as session:
        replaced = await conversation_repo.replace_tool_call(
            session, org_id, conversation_id, tool_call
        )
    if not replaced:
        raise NotFound("No stored item of the conversation holds this tool call.")


async def set_template_variables(
    ctx: Context, *, org_id: str, conversation_id: str, values: Mapping[str, str]
) -> None:
    """Record the template values a conversation uses (API.md section 12)."""
    async with ctx.db.transaction() as session:
        found = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if found is None:
            raise ConversationNotFound()
        await conversation_repo.set_template_variables(session, found, values)


async def set_external_id(
    ctx: Context, *, org_id: str, conversation_id: str, external_id: str
) -> None:
    """Attach the customer's own reference to a conversation."""
    async with ctx.db.transaction() as session:
        found = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if found is None:
            raise ConversationNotFound()
        await conversation_repo.set_external_id(session, found, external_id)


async def add_heard_language(
    ctx: Context, *, org_id: str, conversation_id: str, language: str
) -> None:
    """Add a language heard from the user to the conversation's `heard_languages` (API.md
    section 18); nothing when it is listed already."""
    async with ctx.db.transaction() as session:
        found = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if found is None:
            raise ConversationNotFound()
        await conversation_repo.add_heard_language(session, found, language)
