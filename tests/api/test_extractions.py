"""Extractions over REST (API.md section 16) against the scripted chat server, on SQLite and
PostgreSQL: what the model is sent, how its answer is checked, the one retry, and the
failures (502, 503, 409)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.api.analysis_helpers import (
    APPOINTMENT,
    create_schema,
    spoken,
    tenant_of,
)
from tests.api.helpers import assert_error
from tests.llm_server import ChatServer, json_round, running_chat_server
from tests.ports import free_port
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.records import ToolCall
from parley.services import Context

pytestmark = pytest.mark.anyio

GOOD = {"Date": "9 Apr 2025", "Guests": 4, "Copay": 12.5, "Confirmed as booked": True}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer) -> Settings:
    built: Settings = settings_factory(
        llm_base_url=chat.base_url, llm_model="extractor", llm_timeout_seconds=1
    )
    return built


async def extraction_of(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, **spoken_options: Any
) -> tuple[str, str]:
    """A schema and a spoken, ended conversation: (schema ID, conversation ID)."""
    created = await create_schema(tenant)
    agent = await make_agent(tenant)
    return created["id"], await spoken(ctx, tenant.org.id, agent["name"], **spoken_options)


async def extract(tenant: Tenant, conversation: str, schema_id: str) -> Any:
    return await tenant.client.post(
        f"/v1/conversations/{conversation}/extractions", json={"schema_id": schema_id}
    )


async def test_extraction_good_answer_result_and_extraction_200(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round(GOOD))
    response = await extract(tenant, conversation, schema_id)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["result"] == GOOD
    made = body["extraction"]
    assert made["id"].startswith("extr_")
    assert made["schema"] == {"id": schema_id, "name": "Appointment details", "isDeleted": False}
    assert made["result"] == GOOD
    assert made["created_at"].endswith("Z")
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/extractions")).json()
    assert listed == {"extractions": [made], "next_cursor": None}


async def test_extraction_request_carries_json_schema_format_prompt_and_transcript(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round(GOOD))
    await extract(tenant, conversation, schema_id)
    (sent,) = chat.requests
    assert sent.body["model"] == "extractor"
    wanted = sent.body["response_format"]
    assert wanted["type"] == "json_schema"
    assert wanted["json_schema"]["name"] == "Appointment_details"
    assert wanted["json_schema"]["strict"] is True
    assert wanted["json_schema"]["schema"] == {
        "type": "object",
        "properties": {
            "Date": {"type": ["string", "null"], "description": "The date of the appointment"},
            "Guests": {"type": ["integer", "null"]},
            "Copay": {"type": ["number", "null"], "description": "In dollars"},
            "Confirmed as booked": {"type": ["boolean", "null"]},
        },
        "required": ["Date", "Guests", "Copay", "Confirmed as booked"],
        "additionalProperties": False,
    }
    system, user = sent.body["messages"]
    assert APPOINTMENT["prompt"] in system["content"]
    assert "'Confirmed as booked' (bool)" in system["content"]
    assert user["content"] == (
        "Transcript:\n\nUser: Hi, a table for four on 9 April please.\n"
        "Agent: Booked: four guests on 9 April, a copay of 12.50 dollars."
    )


async def test_extraction_transcript_shows_the_agents_tool_calls(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    call = ToolCall(
        id="call_1", tool_id="tool_x", tool_name="book", parameters={"n": 4}, output={"ok": True}
    )
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent, tool_calls=[call])
    chat.script.rounds.append(json_round(GOOD))
    await extract(tenant, conversation, schema_id)
    transcript = chat.requests[0].body["messages"][1]["content"]
    assert '[The agent called the tool book with {"n": 4}; it answered {"ok": true}]' in transcript


async def test_extraction_field_not_given_is_null(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round({**GOOD, "Copay": None, "Date": None}))
    body = (await extract(tenant, conversation, schema_id)).json()
    assert body["result"] == {**GOOD, "Copay": None, "Date": None}


async def test_extraction_float_field_takes_an_integer_as_a_float(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round({**GOOD, "Copay": 12}))
    body = (await extract(tenant, conversation, schema_id)).json()
    assert body["result"]["Copay"] == 12.0
    assert isinstance(body["result"]["Copay"], float)


async def test_extraction_bad_answer_then_good_one_retry_told_why(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.extend([json_round({**GOOD, "Guests": True}), json_round(GOOD)])
    response = await extract(tenant, conversation, schema_id)
    assert response.status_code == 200, response.text
    assert response.json()["result"] == GOOD
    first, second = chat.requests
    assert second.body["response_format"] == first.body["response_format"]
    assert second.body["messages"][:2] == first.body["messages"]
    told = second.body["messages"][-1]
    assert told["role"] == "user"
    assert "'Guests' must be an integer" in told["content"]


async def test_extraction_bad_answer_twice_502_extraction_failed_nothing_stored(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.extend([json_round("not json"), json_round({"Date": "x"})])
    assert_error(await extract(tenant, conversation, schema_id), 502, "extraction_failed")
    assert len(chat.requests) == 2
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/extractions")).json()
    assert listed["extractions"] == []


async def test_extraction_model_refusing_the_request_twice_502(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.status = 400
    assert_error(await extract(tenant, conversation, schema_id), 502, "extraction_failed")
    assert len(chat.requests) == 2


@pytest.mark.parametrize(
    "answer",
    [
        [GOOD],
        {k: v for k, v in GOOD.items() if k != "Copay"},
        {**GOOD, "Extra": 1},
        {**GOOD, "Guests": 4.5},
        {**GOOD, "Guests": "4"},
        {**GOOD, "Confirmed as booked": "yes"},
        {**GOOD, "Copay": False},
        {**GOOD, "Date": 9},
        '{"Copay": NaN}',
    ],
    ids=[
        "not-an-object",
        "field-missing",
        "field-extra",
        "int-given-a-fraction",
        "int-given-a-string",
        "bool-given-a-string",
        "float-given-a-bool",
        "string-given-a-number",
        "nan",
    ],
)
async def test_extraction_answer_of_wrong_shape_or_type_retried(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer, answer: Any
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.extend([json_round(answer), json_round(GOOD)])
    response = await extract(tenant, conversation, schema_id)
    assert response.json()["result"] == GOOD
    assert len(chat.requests) == 2


async def test_extraction_int_field_refuses_a_bool(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.extend([json_round({**GOOD, "Guests": False})] * 2)
    assert_error(await extract(tenant, conversation, schema_id), 502, "extraction_failed")


async def test_extraction_answer_in_a_code_fence_accepted(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round("```json\n" + json.dumps(GOOD) + "\n```"))
    assert (await extract(tenant, conversation, schema_id)).json()["result"] == GOOD


async def test_extraction_model_silent_503(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.delay_s = 5.0  # past three times the 1 s setting (a whole answer's time)
    assert_error(await extract(tenant, conversation, schema_id), 503, "service_unavailable")
    assert len(chat.requests) == 1  # no retry on a model that does not answer


async def test_extraction_model_server_error_503(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.status = 500
    assert_error(await extract(tenant, conversation, schema_id), 503, "service_unavailable")


async def test_extraction_model_connection_refused_503(settings_factory: Any) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    async with tenant_of(settings_factory(llm_base_url=closed, llm_model="m")) as (app, tenant):
        ctx = app.state.context
        agent = (await tenant.client.post("/v1/agents", json={"name": "a1"})).json()["agent"]
        created = await create_schema(tenant)
        conversation = await spoken(ctx, tenant.org.id, agent["name"])
        assert_error(await extract(tenant, conversation, created["id"]), 503, "service_unavailable")


async def test_extraction_of_a_live_conversation_reads_what_is_stored_so_far(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(
        tenant, ctx, make_agent, lines=[("user", "Four of us.")], ended=False
    )
    chat.script.rounds.append(json_round({**GOOD, "Date": None}))
    response = await extract(tenant, conversation, schema_id)
    assert response.status_code == 200, response.text
    assert chat.requests[0].body["messages"][1]["content"] == "Transcript:\n\nUser: Four of us."


async def test_extraction_schema_by_name_in_the_conversations_project(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    _, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round(GOOD))
    response = await extract(tenant, conversation, "Appointment details")
    assert response.json()["extraction"]["schema"]["name"] == "Appointment details"


async def test_extraction_unknown_schema_404_unknown_conversation_404(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    assert_error(
        await extract(tenant, conversation, "schema_" + "0" * 32),
        404,
        "extraction_schema_not_found",
    )
    assert_error(await extract(tenant, "nope", schema_id), 404, "conversation_not_found")
    missing = await tenant.client.get("/v1/conversations/nope/extractions")
    assert_error(missing, 404, "conversation_not_found")


async def test_extraction_schema_of_another_organization_403(
    tenant: Tenant, other_tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    _, conversation = await extraction_of(tenant, ctx, make_agent)
    foreign = await create_schema(other_tenant)
    assert_error(await extract(tenant, conversation, foreign["id"]), 403, "forbidden")


async def test_extraction_listed_after_its_schema_is_deleted_is_deleted_true(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round(GOOD))
    await extract(tenant, conversation, schema_id)
    await tenant.client.delete(f"/v1/extraction_schemas/{schema_id}")
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/extractions")).json()
    (shown,) = listed["extractions"]
    assert shown["schema"] == {"id": schema_id, "name": "Appointment details", "isDeleted": True}


async def test_extraction_zero_retention_409_no_transcript(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    created = await create_schema(tenant)
    agent = await make_agent(tenant, data_retention_policy={"zero_data_retention": True})
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    assert_error(await extract(tenant, conversation, created["id"]), 409, "no_transcript")
    assert chat.requests == []


async def test_extraction_deleted_with_the_transcript(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round(GOOD))
    await extract(tenant, conversation, schema_id)
    assert (await tenant.client.delete(f"/v1/conversations/{conversation}")).status_code == 200
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/extractions")).json()
    assert listed["extractions"] == []
    assert_error(await extract(tenant, conversation, schema_id), 409, "no_transcript")


async def test_extraction_routes_refuse_a_session_token(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    schema_id, conversation = await extraction_of(tenant, ctx, make_agent)
    token = (await tenant.client.post("/v1/auth/session_token", json={})).json()["session_token"]
    response = await tenant.client.post(
        f"/v1/conversations/{conversation}/extractions",
        json={"schema_id": schema_id},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert_error(response, 403, "insufficient_scope")
