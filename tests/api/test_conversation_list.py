"""`conversations.list`, `get`, `cancel` and `delete` as the official SDK calls them (API.md
sections 5 and 17): its filters, its `pagination` cursors, item IDs, the answers validated
against the SDK's own types; raw HTTP for what the SDK's types do not say (strict
parameters, section 5's `cursor`)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from phonic import AsyncPhonic
from phonic.conversations.types import ConversationsDeleteResponse, ConversationsGetResponse
from phonic.types import ConversationsListResponseConversations
from tests.api.analysis_helpers import spoken
from tests.types import MakeAgent, Tenant

from parley.services import Context, conversations, endings

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


class ManualClock:
    """A clock that stands still until `advance` moves it."""

    def __init__(self, start: float) -> None:
        self._time = start

    def time(self) -> float:
        return self._time

    def monotonic(self) -> float:
        return self._time

    def advance(self, seconds: float) -> None:
        self._time += seconds


async def call_at(
    ctx: Context,
    org_id: str,
    agent: str,
    *,
    start: str,
    seconds: float | None,
    external_id: str | None = None,
) -> str:
    """A conversation that went live at `start` (ISO, UTC) and ended `seconds` later
    (None: still live)."""
    moment = datetime.fromisoformat(start).replace(tzinfo=UTC).timestamp()
    clock = ManualClock(moment)
    at = dataclasses.replace(ctx, clock=clock)
    conversation, _ = await conversations.start_live(
        at,
        org_id=org_id,
        conversation_id=None,
        create_if_missing=True,
        agent=agent,
        project=None,
        end_user=None,
    )
    if external_id is not None:
        await conversations.set_external_id(
            at, org_id=org_id, conversation_id=conversation.id, external_id=external_id
        )
    if seconds is not None:
        clock.advance(seconds)
        await endings.end_conversation(
            at, org_id=org_id, conversation_id=conversation.id, ending=endings.CLIENT_CLOSED
        )
    return conversation.id


async def test_sdk_conversations_list_pages_by_after_and_before(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    made = [
        await call_at(ctx, tenant.org.id, agent["name"], start=f"2025-04-1{i}T10:00:00", seconds=5)
        for i in range(5)
    ]

    first = await sdk.conversations.list(limit=2)
    assert [c.id for c in first.conversations] == made[:2]  # type: ignore[union-attr]
    assert first.pagination.prev_cursor is None  # type: ignore[union-attr]
    assert first.pagination.next_cursor == made[1]  # type: ignore[union-attr]
    second = await sdk.conversations.list(limit=2, after=made[1])
    assert [c.id for c in second.conversations] == made[2:4]  # type: ignore[union-attr]
    assert (second.pagination.prev_cursor, second.pagination.next_cursor) == (made[2], made[3])  # type: ignore[union-attr]
    last = await sdk.conversations.list(limit=2, after=made[3])
    assert [c.id for c in last.conversations] == made[4:]  # type: ignore[union-attr]
    assert (last.pagination.prev_cursor, last.pagination.next_cursor) == (made[4], None)  # type: ignore[union-attr]
    back = await sdk.conversations.list(limit=2, before=made[4])
    assert [c.id for c in back.conversations] == made[2:4]  # type: ignore[union-attr]
    assert (back.pagination.prev_cursor, back.pagination.next_cursor) == (made[2], made[3])  # type: ignore[union-attr]
    start = await sdk.conversations.list(limit=2, before=made[2])
    assert [c.id for c in start.conversations] == made[:2]  # type: ignore[union-attr]
    assert (start.pagination.prev_cursor, start.pagination.next_cursor) == (None, made[1])  # type: ignore[union-attr]


async def test_conversations_list_next_cursor_continues_as_cursor(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    made = [await spoken(ctx, tenant.org.id, agent["name"]) for _ in range(3)]
    first = (await tenant.client.get("/v1/conversations", params={"limit": 2})).json()
    assert set(first) == {"conversations", "next_cursor", "pagination"}
    rest = await tenant.client.get(
        "/v1/conversations", params={"limit": 2, "cursor": first["next_cursor"]}
    )
    assert [c["id"] for c in rest.json()["conversations"]] == made[2:]
    assert rest.json()["next_cursor"] is None


async def test_sdk_conversations_list_filters_external_id_duration_and_start(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    org = tenant.org.id
    short = await call_at(
        ctx, org, agent, start="2025-04-17T10:00:00", seconds=30, external_id="t-1"
    )
    long = await call_at(ctx, org, agent, start="2025-04-18T09:00:00", seconds=120)
    live = await call_at(ctx, org, agent, start="2025-04-18T12:00:00", seconds=None)

    async def listed(**filters: object) -> list[str]:
        page = await sdk.conversations.list(**filters)  # type: ignore[arg-type]
        return [c.id for c in page.conversations]  # type: ignore[union-attr]

    assert await listed() == [short, long, live]
    assert await listed(external_id="t-1") == [short]
    assert await listed(duration_min=60) == [long]
    assert await listed(duration_max=60) == [short]
    assert await listed(duration_min=30, duration_max=30) == [short]
    assert await listed(started_at_min="2025-04-18") == [long, live]
    assert await listed(started_at_max="2025-04-17") == [short]
    assert await listed(started_at_max="2025-04-17T10:00:00Z") == [short]
    assert await listed(started_at_min="2025-04-17T10:00:00.001Z") == [long, live]
    assert await listed(started_at_min="2025-04-18T10:00:00+02:00") == [long, live]
    assert await listed(started_at_min="2025-04-18T10:00:00+00:00", duration_min=0) == []
    assert await listed(project="main", external_id="t-2") == []


async def test_sdk_conversation_items_have_stable_ids_and_sdk_members(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    conversation_id = await spoken(ctx, tenant.org.id, agent["name"])

    got = (await sdk.conversations.get(conversation_id)).conversation
    again = (await sdk.conversations.get(conversation_id)).conversation
    listed = (await sdk.conversations.list()).conversations  # type: ignore[union-attr]
    ids = [item.id for item in got.items]
    assert all(i.startswith("item_") and len(i) == 37 for i in ids)
    assert len(set(ids)) == 2
    assert [item.id for item in again.items] == ids
    assert [item.id for item in listed[0].items] == ids
    assert [(i.item_idx, i.role) for i in got.items] == [(0, "user"), (1, "assistant")]
    assert got.items[0].live_transcript == "Hi, a table for four on 9 April please."
    assert got.items[0].started_at is not None
    assert (got.workspace, got.origin, got.model) == (tenant.org.name, "direct", "parley")
    assert got.agent is not None
    assert got.agent.is_deleted is False
    assert got.analysis.id == conversation_id
    assert (got.default_language, got.input_format) == ("en", agent["audio_format"])
    assert got.task_results == {}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"duration_min": "-1"}, "duration_min"),
        ({"duration_max": "ten"}, "duration_max"),
        ({"duration_min": "60", "duration_max": "30"}, "duration_min"),
        ({"started_at_min": "yesterday"}, "started_at_min"),
        ({"started_at_max": "2025-02-30"}, "started_at_max"),
        ({"started_at_min": "2025-04-17T10:00:00"}, "started_at_min"),
        ({"started_at_min": "2025-04-18", "started_at_max": "2025-04-17"}, "started_at_min"),
        ({"before": "conv_1", "after": "conv_2"}, "before"),
        ({"cursor": "abc", "after": "conv_2"}, "cursor"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"audio_container": "wav.gz"}, "audio_container"),
        ({"external_id": "x" * 257}, "external_id"),
    ],
    ids=[
        "negative-duration",
        "duration-not-a-number",
        "durations-crossed",
        "date-not-iso",
        "date-not-a-day",
        "time-without-zone",
        "dates-crossed",
        "before-and-after",
        "cursor-and-after",
        "limit-zero",
        "limit-over-100",
        "gzip-container",
        "external-id-too-long",
    ],
)
async def test_conversations_list_bad_parameter_validation_error(
    tenant: Tenant, params: dict[str, str], field: str
) -> None:
    response = await tenant.client.get("/v1/conversations", params=params)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"]["code"] == "validation_error"
    assert field in body["param_errors"]


@pytest.mark.parametrize("name", ["after", "before"])
async def test_conversations_list_cursor_of_another_org_invalid_cursor(
    tenant: Tenant, other_tenant: Tenant, ctx: Context, make_agent: MakeAgent, name: str
) -> None:
    agent = await make_agent(other_tenant)
    theirs = await spoken(ctx, other_tenant.org.id, agent["name"])
    response = await tenant.client.get("/v1/conversations", params={name: theirs})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_cursor"
    assert name in response.json()["param_errors"]


async def test_conversations_answers_validate_as_the_sdks_types(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    """Pydantic validation (not the SDK's lenient construction): every member the SDK's
    `Conversation` and `ConversationItem` require is there, with its type."""
    agent = await make_agent(tenant)
    conversation_id = await spoken(ctx, tenant.org.id, agent["name"])
    got = await tenant.client.get(f"/v1/conversations/{conversation_id}")
    ConversationsGetResponse.model_validate(got.json())
    listed = await tenant.client.get("/v1/conversations", params={"limit": 1})
    ConversationsListResponseConversations.model_validate(listed.json())


async def test_sdk_conversations_cancel_and_delete_success(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    live = await spoken(ctx, tenant.org.id, agent["name"], ended=False)
    assert (await sdk.conversations.cancel(live)).success is True
    deleted = await sdk.conversations.delete(live)
    assert ConversationsDeleteResponse.model_validate(deleted.model_dump()).success is True
    kept = (await sdk.conversations.get(live)).conversation
    assert kept.items == []
    assert kept.deletion_info is not None
