"""The tool resource over REST (API.md section 12), on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from sqlalchemy import text
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.db.engine import create_engine

pytestmark = pytest.mark.anyio

FLAT = [
    {"type": "string", "name": "city", "description": "City", "is_required": True},
    {
        "type": "array",
        "name": "days",
        "description": "",
        "is_required": False,
        "item_type": "integer",
    },
    {
        "type": "enum",
        "name": "unit",
        "description": "Unit",
        "is_required": False,
        "enum_values": ["c", "f"],
        "location": "query_string",
    },
]
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City"},
        "stops": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}


def webhook(name: str = "weather", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Looks up the weather.",
        "type": "custom_webhook",
        "execution_mode": "sync",
        "endpoint_url": "https://tools.example.com/weather",
        "parameters": FLAT,
        **fields,
    }


def websocket(name: str = "lookup", **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": "custom_websocket", "parameters": SCHEMA, **fields}


async def create(tenant: Tenant, body: dict[str, Any], **params: str) -> dict[str, Any]:
    response = await tenant.client.post("/v1/tools", json=body, params=params or None)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def get(tenant: Tenant, ref: str, **params: str) -> dict[str, Any]:
    response = await tenant.client.get(f"/v1/tools/{ref}", params=params or None)
    assert response.status_code == 200, response.text
    tool: dict[str, Any] = response.json()["tool"]
    return tool


# --- create and read -------------------------------------------------------------------


async def test_create_tool_answers_id_name_and_secret_once(tenant: Tenant) -> None:
    created = await create(tenant, webhook())

    assert set(created) == {"id", "name", "signing_secret"}
    assert created["id"].startswith("tool_")
    assert created["name"] == "weather"
    secret = created["signing_secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    shown = [await get(tenant, created["id"])]
    shown += (await tenant.client.get("/v1/tools")).json()["tools"]
    for tool in shown:
        assert "signing_secret" not in tool
        assert secret not in str(tool)


async def test_create_tool_stores_the_secret_sealed(tenant: Tenant, database_url: str) -> None:
    created = await create(tenant, webhook())
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            stored = await connection.scalar(
                text("SELECT signing_secret_sealed FROM tools WHERE id = :id"),
                {"id": created["id"]},
            )
    finally:
        await engine.dispose()
    assert stored
    assert created["signing_secret"] not in stored
    assert created["signing_secret"].removeprefix("whsec_") not in stored


async def test_tool_endpoint_header_values_stored_sealed_and_read_back_in_clear(
    tenant: Tenant, database_url: str
) -> None:
    created = await create(tenant, webhook(endpoint_headers={"X-Api-Key": "sk-customer-123"}))
    patched = await tenant.client.patch(
        "/v1/tools/weather", json={"endpoint_headers": {"X-Api-Key": "sk-customer-456"}}
    )
    assert patched.status_code == 200, patched.text
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            stored = await connection.scalar(
                text("SELECT endpoint_headers FROM tools WHERE id = :id"), {"id": created["id"]}
            )
    finally:
        await engine.dispose()
    assert "X-Api-Key" in str(stored)
    assert "sk-customer" not in str(stored)
    assert (await get(tenant, "weather"))["endpoint_headers"] == {"X-Api-Key": "sk-customer-456"}
    renamed = await tenant.client.patch("/v1/tools/weather", json={"description": "Weather."})
    assert renamed.status_code == 200, renamed.text  # untouched headers are not sealed twice
    assert (await get(tenant, "weather"))["endpoint_headers"] == {"X-Api-Key": "sk-customer-456"}


async def test_get_tool_shows_every_field_of_api_md(tenant: Tenant) -> None:
    created = await create(tenant, webhook(endpoint_headers={"X-Api-Key": "k"}))

    tool = await get(tenant, "weather")

    assert tool == {
        "id": created["id"],
        "name": "weather",
        "description": "Looks up the weather.",
        "project": {"id": tool["project"]["id"], "name": "main"},
        "type": "custom_webhook",
        "execution_mode": "sync",
        "parameters": FLAT,
        "parameter_locations": None,
        "endpoint_method": "POST",
        "endpoint_url": "https://tools.example.com/weather",
        "endpoint_headers": {"X-Api-Key": "k"},
        "endpoint_timeout_ms": 5000,
        "tool_call_output_timeout_ms": None,
        "require_speech_before_tool_call": False,
        # A transfer tool's members (API.md section 15), null for a webhook tool.
        "phone_number": None,
        "dtmf": None,
        "dynamic_dtmf": None,
        "use_agent_phone_number": None,
        "keep_listening": None,
        "post_transfer_message": None,
        "on_transfer_no_answer": None,
        "detect_voicemail": None,
        "agents_to_transfer_to": None,
        "created_at": tool["created_at"],
        "updated_at": tool["created_at"],
    }
    assert tool["project"]["id"].startswith("proj_")


async def test_websocket_tool_defaults_output_timeout_and_keeps_schema(tenant: Tenant) -> None:
    await create(tenant, websocket(execution_mode="async"))

    tool = await get(tenant, "lookup")

    assert tool["parameters"] == SCHEMA
    assert tool["execution_mode"] == "async"
    assert tool["tool_call_output_timeout_ms"] == 5000
    assert tool["endpoint_url"] is tool["endpoint_method"] is tool["endpoint_timeout_ms"] is None


async def test_tool_not_found_404(tenant: Tenant) -> None:
    response = await tenant.client.get("/v1/tools/nothing")
    assert_error(response, 404, "tool_not_found")
    response = await tenant.client.delete("/v1/tools/tool_" + "0" * 32)
    assert_error(response, 404, "tool_not_found")


async def test_tool_of_another_org_by_id_403(tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = await create(other_tenant, webhook())

    for response in (
        await tenant.client.get(f"/v1/tools/{theirs['id']}"),
        await tenant.client.patch(f"/v1/tools/{theirs['id']}", json={"description": "x"}),
        await tenant.client.delete(f"/v1/tools/{theirs['id']}"),
    ):
        assert_error(response, 403, "forbidden")
    assert (await get(other_tenant, theirs["id"]))["description"] == "Looks up the weather."


# --- projects --------------------------------------------------------------------------


async def test_tools_project_query_scopes_names_and_listing(tenant: Tenant) -> None:
    project = (await tenant.client.post("/v1/projects", json={"name": "sales"})).json()["project"]
    await create(tenant, webhook())
    in_sales = await create(tenant, webhook(), project="sales")

    assert (await get(tenant, "weather", project="sales"))["id"] == in_sales["id"]
    assert (await get(tenant, "weather", project=project["id"]))["id"] == in_sales["id"]
    listed = (await tenant.client.get("/v1/tools", params={"project": "sales"})).json()
    assert [t["id"] for t in listed["tools"]] == [in_sales["id"]]
    assert listed["tools"][0]["project"] == {"id": project["id"], "name": "sales"}
    everything = (await tenant.client.get("/v1/tools")).json()["tools"]
    assert len(everything) == 2


async def test_tools_unknown_project_404(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/tools", json=webhook(), params={"project": "nope"})
    assert_error(response, 404, "project_not_found")
    response = await tenant.client.get("/v1/tools", params={"project": "nope"})
    assert_error(response, 404, "project_not_found")


# --- names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["", "Weather", "with-dash", "a" * 65, "tool_" + "0" * 32, "natural_conversation_ending"],
    ids=["empty", "upper", "dash", "too-long", "id-shaped", "built-in"],
)
async def test_create_tool_bad_name_400(tenant: Tenant, name: str) -> None:
    response = await tenant.client.post("/v1/tools", json=webhook(name))
    body = assert_error(response, 400, "validation_error")
    assert "name" in body["param_errors"]


async def test_create_tool_name_taken_409(tenant: Tenant) -> None:
    await create(tenant, webhook())
    response = await tenant.client.post("/v1/tools", json=websocket("weather"))
    assert_error(response, 409, "name_taken")


async def test_update_tool_name_taken_409(tenant: Tenant) -> None:
    await create(tenant, webhook())
    await create(tenant, websocket())
    response = await tenant.client.patch("/v1/tools/lookup", json={"name": "weather"})
    assert_error(response, 409, "name_taken")


# --- update and delete -----------------------------------------------------------------


async def test_update_tool_answers_success_and_changes_fields(tenant: Tenant) -> None:
    await create(tenant, webhook())

    response = await tenant.client.patch(
        "/v1/tools/weather",
        json={"description": "New.", "endpoint_timeout_ms": 9000, "endpoint_method": "GET"},
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"success": True}
    tool = await get(tenant, "weather")
    assert (tool["description"], tool["endpoint_timeout_ms"]) == ("New.", 9000)
    assert tool["endpoint_method"] == "GET"


async def test_update_tool_checks_the_merged_tool(tenant: Tenant) -> None:
    await create(tenant, webhook(parameters=SCHEMA))

    response = await tenant.client.patch("/v1/tools/weather", json={"type": "custom_websocket"})

    body = assert_error(response, 400, "validation_error")
    assert "endpoint_url" in body["param_errors"]


async def test_update_tool_null_required_field_400(tenant: Tenant) -> None:
    await create(tenant, webhook())
    response = await tenant.client.patch("/v1/tools/weather", json={"parameters": None})
    body = assert_error(response, 400, "validation_error")
    assert body["param_errors"] == {"parameters": "may not be null"}


async def test_update_tool_rename_follows_in_agents(tenant: Tenant, make_agent: MakeAgent) -> None:
    await create(tenant, webhook())
    agent = await make_agent(tenant, tools=["weather", "natural_conversation_ending"])

    response = await tenant.client.patch("/v1/tools/weather", json={"name": "forecast"})

    assert response.status_code == 200, response.text
    again = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert again["tools"] == ["forecast", "natural_conversation_ending"]


async def test_delete_tool_in_use_409_then_deleted(tenant: Tenant, make_agent: MakeAgent) -> None:
    await create(tenant, webhook())
    agent = await make_agent(tenant, tools=["weather"])

    assert_error(await tenant.client.delete("/v1/tools/weather"), 409, "tool_in_use")

    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"tools": []})
    response = await tenant.client.delete("/v1/tools/weather")
    assert response.json() == {"success": True}
    assert_error(await tenant.client.get("/v1/tools/weather"), 404, "tool_not_found")


async def test_tool_changes_are_audited(tenant: Tenant) -> None:
    created = await create(tenant, webhook())
    await tenant.client.patch("/v1/tools/weather", json={"description": "x"})
    await tenant.client.delete("/v1/tools/weather")

    events = (await tenant.client.get("/v1/audit_events", params={"target": created["id"]})).json()[
        "audit_events"
    ]

    events.sort(key=lambda event: event["seq"])
    assert [e["action"] for e in events] == ["tool.create", "tool.update", "tool.delete"]
    assert created["signing_secret"] not in str(events)


# --- agents' tools ---------------------------------------------------------------------


async def test_agent_unknown_tool_400(tenant: Tenant, other_tenant: Tenant) -> None:
    await create(other_tenant, webhook())
    await tenant.client.post("/v1/projects", json={"name": "sales"})
    await create(tenant, webhook("sales_only"), project="sales")

    for tools in (["weather"], ["sales_only"], ["nope"]):
        response = await tenant.client.post("/v1/agents", json={"name": "a", "tools": tools})
        body = assert_error(response, 400, "unknown_tool")
        assert "tools" in body["param_errors"]


async def test_agent_lists_project_tools_and_built_in(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await create(tenant, webhook())

    agent = await make_agent(tenant, tools=["natural_conversation_ending", "weather"])

    assert agent["tools"] == ["natural_conversation_ending", "weather"]
    response = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"tools": ["gone"]})
    assert_error(response, 400, "unknown_tool")


# --- parameters and fields -------------------------------------------------------------


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ("city", "parameters"),
        ({"type": "array", "items": {}}, "parameters.type"),
        ({"type": "object", "properties": []}, "parameters.properties"),
        ({"type": "object", "properties": {"a": {"type": "date"}}}, "parameters.properties.a.type"),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
            "parameters.required",
        ),
        (
            {"type": "object", "properties": {}, "additionalProperties": True},
            "parameters.additionalProperties",
        ),
        (
            {"type": "object", "properties": {"conversation_id": {"type": "string"}}},
            "parameters.properties.conversation_id",
        ),
        (
            [{"type": "string", "name": "a", "description": "", "is_required": "yes"}],
            "parameters[0].is_required",
        ),
        (
            [{"type": "array", "name": "a", "description": "", "is_required": True}],
            "parameters[0].item_type",
        ),
        (
            [{"type": "enum", "name": "a", "description": "", "is_required": True}],
            "parameters[0].enum_values",
        ),
        ([{"type": "string", "name": "a", "description": ""}], "parameters[0].is_required"),
        (
            [{"type": "string", "name": "a", "description": "", "is_required": True, "extra": 1}],
            "parameters[0].extra",
        ),
        (
            [
                {
                    "type": "string",
                    "name": "a",
                    "description": "",
                    "is_required": True,
                    "location": "header",
                }
            ],
            "parameters[0].location",
        ),
    ],
    ids=[
        "string",
        "top-not-object",
        "properties-list",
        "unknown-type",
        "required-unknown",
        "additional-true",
        "reserved-name",
        "flat-bool",
        "flat-array-no-item-type",
        "flat-enum-no-values",
        "flat-missing-member",
        "flat-unknown-member",
        "flat-bad-location",
    ],
)
async def test_create_tool_bad_parameters_400_naming_the_field(
    tenant: Tenant, parameters: Any, field: str
) -> None:
    response = await tenant.client.post("/v1/tools", json=webhook(parameters=parameters))
    body = assert_error(response, 400, "validation_error")
    assert field in body["param_errors"], body


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


async def test_create_tool_parameters_nest_at_most_five_levels(tenant: Tenant) -> None:
    five = {"type": "object", "properties": {"x": nested(5)}}
    six = {"type": "object", "properties": {"x": nested(6)}}

    await create(tenant, websocket("five", parameters=five))
    response = await tenant.client.post("/v1/tools", json=websocket("six", parameters=six))

    body = assert_error(response, 400, "validation_error")
    assert any(key.startswith("parameters.properties.x") for key in body["param_errors"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (webhook(endpoint_url=None), "endpoint_url"),
        (webhook(endpoint_url="ftp://tools.example.com/x"), "endpoint_url"),
        (webhook(endpoint_url="/relative"), "endpoint_url"),
        (webhook(endpoint_timeout_ms=999), "endpoint_timeout_ms"),
        (webhook(endpoint_timeout_ms=180_001), "endpoint_timeout_ms"),
        (webhook(endpoint_method="PUT"), "endpoint_method"),
        (webhook(tool_call_output_timeout_ms=5000), "tool_call_output_timeout_ms"),
        (webhook(endpoint_headers={"bad header": "x"}), "endpoint_headers"),
        (websocket(endpoint_url="https://tools.example.com/x"), "endpoint_url"),
        (websocket(endpoint_timeout_ms=5000), "endpoint_timeout_ms"),
        (websocket(parameter_locations={"city": "query_string"}), "parameter_locations"),
        (websocket(tool_call_output_timeout_ms=10), "tool_call_output_timeout_ms"),
        (websocket(execution_mode="later"), "execution_mode"),
        (websocket(type="custom_context"), "type"),
        (webhook(parameters=[dict(FLAT[0], location="url_path")]), "parameters[0].location"),
        (webhook(endpoint_url="https://x.example.com/{other}", parameters=[]), "endpoint_url"),
        (
            webhook(endpoint_method="GET", parameters=[dict(FLAT[0], location="request_body")]),
            "parameters[0].location",
        ),
        (
            webhook(parameters=SCHEMA, parameter_locations={"nope": "query_string"}),
            "parameter_locations.nope",
        ),
        (webhook(surprise=1), "surprise"),
    ],
    ids=[
        "webhook-without-url",
        "webhook-ftp",
        "webhook-relative-url",
        "timeout-low",
        "timeout-high",
        "method-put",
        "webhook-output-timeout",
        "header-name",
        "websocket-url",
        "websocket-endpoint-timeout",
        "websocket-locations",
        "websocket-output-timeout-low",
        "execution-mode",
        "type",
        "url-path-without-placeholder",
        "placeholder-without-parameter",
        "get-with-body",
        "location-of-unknown-parameter",
        "unknown-member",
    ],
)
async def test_create_tool_bad_field_400_naming_it(
    tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    response = await tenant.client.post("/v1/tools", json=body)
    errors = assert_error(response, 400, "validation_error")["param_errors"]
    assert field in errors, errors


async def test_create_webhook_tool_url_path_parameter_fills_placeholder(tenant: Tenant) -> None:
    city = dict(FLAT[0], location="url_path")
    body = webhook(endpoint_url="https://x.example.com/weather/{city}", parameters=[city])

    created = await create(tenant, body)

    assert (await get(tenant, created["id"]))["parameters"] == [city]


FRAMING = ["Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "TE",
           "Trailer", "Keep-Alive", "Proxy-Connection"]  # fmt: skip


@pytest.mark.parametrize("name", [*FRAMING, "transfer-encoding", "HOST", "proxy-CONNECTION"])
async def test_endpoint_headers_framing_header_refused_at_creation(
    tenant: Tenant, name: str
) -> None:
    body = webhook(endpoint_headers={"X-Api-Key": "k1", name: "x"})

    response = await tenant.client.post("/v1/tools", json=body)

    errors = assert_error(response, 400, "validation_error")["param_errors"]
    assert set(errors) == {"endpoint_headers"}
    assert name in errors["endpoint_headers"]
    assert (await tenant.client.get("/v1/tools")).json()["tools"] == []


@pytest.mark.parametrize("name", ["Transfer-Encoding", "connection", "Host"])
async def test_endpoint_headers_framing_header_refused_at_patch(tenant: Tenant, name: str) -> None:
    await create(tenant, webhook(endpoint_headers={"X-Api-Key": "k1"}))

    response = await tenant.client.patch(
        "/v1/tools/weather", json={"endpoint_headers": {"X-Api-Key": "k2", name: "chunked"}}
    )

    errors = assert_error(response, 400, "validation_error")["param_errors"]
    assert set(errors) == {"endpoint_headers"}
    kept = (await tenant.client.get("/v1/tools/weather")).json()["tool"]
    assert kept["endpoint_headers"] == {"X-Api-Key": "k1"}


async def test_endpoint_headers_ordinary_headers_accepted(tenant: Tenant) -> None:
    headers = {"Authorization": "Bearer t", "User-Agent": "Acme/1", "X-Connection-Id": "7"}

    await create(tenant, webhook(endpoint_headers=headers))

    tool = (await tenant.client.get("/v1/tools/weather")).json()["tool"]
    assert tool["endpoint_headers"] == headers
