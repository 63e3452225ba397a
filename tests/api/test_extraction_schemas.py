"""Extraction schemas over REST (API.md section 16), on SQLite and PostgreSQL: the resource,
its rules, and agents that name schemas (and evaluation prompts)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.analysis_helpers import APPOINTMENT, create_prompt, create_schema, spoken
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.services import Context

pytestmark = pytest.mark.anyio


def schema(**changes: Any) -> dict[str, Any]:
    return {**APPOINTMENT, **changes}


def fields(count: int) -> list[dict[str, str]]:
    return [{"name": f"f{n}", "type": "string"} for n in range(count)]


async def test_extraction_schema_create_answers_id_and_name_200(tenant: Tenant) -> None:
    created = await create_schema(tenant)
    assert set(created) == {"id", "name"}
    assert created["id"].startswith("schema_")
    assert created["name"] == "Appointment details"


async def test_extraction_schema_get_by_name_and_id_in_the_sdk_shape(tenant: Tenant) -> None:
    created = await create_schema(tenant)
    by_name = await tenant.client.get("/v1/extraction_schemas/Appointment details")
    by_id = await tenant.client.get(f"/v1/extraction_schemas/{created['id']}")
    assert by_name.status_code == by_id.status_code == 200, by_name.text
    shown = by_id.json()["extraction_schema"]
    assert by_name.json()["extraction_schema"] == shown
    assert shown["id"] == created["id"]
    assert shown["prompt"] == APPOINTMENT["prompt"]
    assert shown["project"]["name"] == "main"
    assert shown["fields"][0] == APPOINTMENT["fields"][0]
    assert shown["fields"][1] == {"name": "Guests", "type": "int", "description": None}


async def test_extraction_schema_list_by_project(tenant: Tenant) -> None:
    await create_schema(tenant)
    assert (await tenant.client.post("/v1/projects", json={"name": "other"})).status_code == 201
    response = await tenant.client.post(
        "/v1/extraction_schemas", params={"project": "other"}, json=schema(name="Other")
    )
    assert response.status_code == 200, response.text
    everything = (await tenant.client.get("/v1/extraction_schemas")).json()
    in_other = (await tenant.client.get("/v1/extraction_schemas?project=other")).json()
    assert [s["name"] for s in everything["extraction_schemas"]] == [
        "Appointment details",
        "Other",
    ]
    assert [s["name"] for s in in_other["extraction_schemas"]] == ["Other"]
    assert in_other["next_cursor"] is None


async def test_extraction_schema_patch_success_and_checked_as_a_whole(tenant: Tenant) -> None:
    created = await create_schema(tenant)
    path = f"/v1/extraction_schemas/{created['id']}"
    response = await tenant.client.patch(path, json={"prompt": "New.", "fields": fields(2)})
    assert response.json() == {"success": True}
    shown = (await tenant.client.get(path)).json()["extraction_schema"]
    assert (shown["name"], shown["prompt"], len(shown["fields"])) == (
        "Appointment details",
        "New.",
        2,
    )
    assert_error(await tenant.client.patch(path, json={"fields": []}), 400, "validation_error")
    assert_error(await tenant.client.patch(path, json={"prompt": None}), 400, "validation_error")


async def test_extraction_schema_delete_success_then_404(tenant: Tenant) -> None:
    created = await create_schema(tenant)
    path = f"/v1/extraction_schemas/{created['id']}"
    assert (await tenant.client.delete(path)).json() == {"success": True}
    assert_error(await tenant.client.get(path), 404, "extraction_schema_not_found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (schema(fields=[]), "fields"),
        (schema(fields=fields(51)), "fields"),
        (schema(fields=[*fields(1), {"name": "f0", "type": "int"}]), "fields[1].name"),
        (schema(fields=[{"name": "x", "type": "date"}]), "fields.0.type"),
        (schema(fields=[{"name": " x", "type": "int"}]), "fields[0].name"),
        (schema(name=""), "name"),
        (schema(name="a/b"), "name"),
        (schema(name="schema_" + "0" * 32), "name"),
        (schema(name="x" * 101), "name"),
        (schema(prompt="p" * 20_001), "prompt"),
    ],
    ids=[
        "no-fields",
        "51-fields",
        "repeated-field-name",
        "unknown-type",
        "blank-edged-field-name",
        "empty-name",
        "slash-in-name",
        "id-shaped-name",
        "long-name",
        "long-prompt",
    ],
)
async def test_extraction_schema_create_refused_400_naming_the_field(
    tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    refused = assert_error(
        await tenant.client.post("/v1/extraction_schemas", json=body), 400, "validation_error"
    )
    assert any(name.startswith(field) for name in refused["param_errors"]), refused


async def test_extraction_schema_name_taken_409(tenant: Tenant) -> None:
    await create_schema(tenant)
    assert_error(
        await tenant.client.post("/v1/extraction_schemas", json=APPOINTMENT), 409, "name_taken"
    )


async def test_extraction_schema_other_organizations_id_403(
    tenant: Tenant, other_tenant: Tenant
) -> None:
    created = await create_schema(other_tenant)
    assert_error(
        await tenant.client.get(f"/v1/extraction_schemas/{created['id']}"), 403, "forbidden"
    )


async def test_extraction_schema_unknown_project_404(tenant: Tenant) -> None:
    assert_error(
        await tenant.client.get("/v1/extraction_schemas/x?project=nope"),
        404,
        "extraction_schema_not_found",
    )


async def test_extraction_schema_and_eval_prompt_changes_are_audited(tenant: Tenant) -> None:
    created = await create_schema(tenant)
    await tenant.client.patch(f"/v1/extraction_schemas/{created['id']}", json={"prompt": "x"})
    await tenant.client.delete(f"/v1/extraction_schemas/{created['id']}")
    prompt = await create_prompt(tenant)
    actions = []
    for target in (created["id"], prompt["id"]):
        page = await tenant.client.get("/v1/audit_events", params={"target": target})
        events = sorted(page.json()["audit_events"], key=lambda event: event["seq"])
        actions += [event["action"] for event in events]
    assert actions == [
        "extraction_schema.create",
        "extraction_schema.update",
        "extraction_schema.delete",
        "eval_prompt.create",
    ]


# --- agents naming schemas and prompts -----------------------------------------------------


async def test_agent_extraction_schemas_and_eval_prompts_round_trip(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await create_schema(tenant)
    await create_prompt(tenant)
    agent = await make_agent(
        tenant, extraction_schemas=["Appointment details"], eval_prompts=["used_chocolate"]
    )
    assert agent["extraction_schemas"] == ["Appointment details"]
    assert agent["eval_prompts"] == ["used_chocolate"]
    response = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"extraction_schemas": [], "eval_prompts": []}
    )
    assert response.status_code == 200, response.text
    assert response.json()["agent"]["extraction_schemas"] == []
    assert response.json()["agent"]["eval_prompts"] == []


async def test_agent_defaults_name_no_schema_and_no_prompt(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    assert (agent["extraction_schemas"], agent["eval_prompts"]) == ([], [])


@pytest.mark.parametrize(
    ("field", "code"),
    [("extraction_schemas", "unknown_extraction_schema"), ("eval_prompts", "unknown_eval_prompt")],
)
async def test_agent_unknown_schema_or_prompt_400(tenant: Tenant, field: str, code: str) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "a1", field: ["nope"]})
    refused = assert_error(response, 400, code)
    assert field in refused["param_errors"]
    await tenant.client.post("/v1/agents", json={"name": "a2"})
    assert_error(await tenant.client.patch("/v1/agents/a2", json={field: ["nope"]}), 400, code)


async def test_agent_schema_of_another_project_400(tenant: Tenant) -> None:
    await tenant.client.post("/v1/projects", json={"name": "other"})
    await tenant.client.post(
        "/v1/extraction_schemas", params={"project": "other"}, json=APPOINTMENT
    )
    response = await tenant.client.post(
        "/v1/agents", json={"name": "a1", "extraction_schemas": ["Appointment details"]}
    )
    assert_error(response, 400, "unknown_extraction_schema")


async def test_extraction_schema_delete_in_use_409_schema_in_use_then_deleted(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    created = await create_schema(tenant)
    agent = await make_agent(tenant, extraction_schemas=["Appointment details"])
    path = f"/v1/extraction_schemas/{created['id']}"
    refused = assert_error(await tenant.client.delete(path), 409, "schema_in_use")
    assert agent["name"] in refused["error"]["message"]
    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"extraction_schemas": []})
    assert (await tenant.client.delete(path)).json() == {"success": True}


async def test_extraction_schema_rename_renames_it_in_agents(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await create_schema(tenant)
    agent = await make_agent(tenant, extraction_schemas=["Appointment details"])
    response = await tenant.client.patch(
        "/v1/extraction_schemas/Appointment details", json={"name": "Booking"}
    )
    assert response.status_code == 200, response.text
    shown = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert shown["extraction_schemas"] == ["Booking"]


# --- without a language model --------------------------------------------------------------


async def test_extraction_without_language_model_409_no_language_model(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    created = await create_schema(tenant)
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    path = f"/v1/conversations/{conversation}"
    extracted = await tenant.client.post(f"{path}/extractions", json={"schema_id": created["id"]})
    assert_error(extracted, 409, "no_language_model")
    evaluated = await tenant.client.post(f"{path}/evals", json={"prompt_id": prompt["id"]})
    assert_error(evaluated, 409, "no_language_model")
