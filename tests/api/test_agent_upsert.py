"""`PUT /v1/agents/upsert` (API.md section 17; services/agent_upsert.py) over raw HTTP, on
SQLite and PostgreSQL: it creates, or replaces every field (those not given take their
defaults), refuses a disabled agent as PATCH does, and two upserts of one name at once give
one insert and updates, never a 500 or a second agent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import insert, select
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.clock import utcnow
from parley.db.engine import create_engine
from parley.db.tables import AgentRow, ProjectRow
from parley.ids import new_id
from parley.services import Context

pytestmark = pytest.mark.anyio

WRITERS = 4
"""Upserts of one name at once. They queue on the agent's row lock, each waiting for the
ones before it within the database's 5 s statement bound: a few keep a loaded test machine
well inside it."""


async def upsert(tenant: Tenant, body: dict[str, Any], **params: str) -> dict[str, Any]:
    response = await tenant.client.put("/v1/agents/upsert", json=body, params=params or None)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert (answer["id"], answer["name"]) == (answer["agent"]["id"], answer["agent"]["name"])
    return answer


async def test_agent_upsert_inserts_then_replaces_with_defaults_for_what_is_not_given(
    tenant: Tenant,
) -> None:
    first = await upsert(
        tenant,
        {
            "name": "desk",
            "system_prompt": "You are the desk.",
            "welcome_message": "Hello.",
            "audio_speed": 1.5,
            "boosted_keywords": ["Acme"],
        },
    )
    assert (first["inserted"], first["updated"]) == (True, False)
    assert first["agent"]["audio_speed"] == 1.5

    second = await upsert(tenant, {"name": "desk", "system_prompt": "You are the new desk."})
    assert (second["inserted"], second["updated"]) == (False, True)
    agent = second["agent"]
    assert agent["id"] == first["id"]
    assert agent["system_prompt"] == "You are the new desk."
    assert (agent["welcome_message"], agent["audio_speed"], agent["boosted_keywords"]) == (
        None,
        1.0,
        [],
    )
    assert agent["created_at"] == first["agent"]["created_at"]
    listed = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert [a["name"] for a in listed] == ["desk"]


async def test_agent_upsert_project_by_query_or_body(tenant: Tenant) -> None:
    created = await tenant.client.post("/v1/projects", json={"name": "sales"})
    assert created.status_code == 201, created.text
    by_query = await upsert(tenant, {"name": "desk"}, project="sales")
    assert by_query["agent"]["project"]["name"] == "sales"
    by_body = await upsert(tenant, {"name": "desk", "project": "sales"})
    assert (by_body["id"], by_body["inserted"]) == (by_query["id"], False)
    in_main = await upsert(tenant, {"name": "desk"})
    assert in_main["inserted"] is True
    assert in_main["agent"]["project"]["name"] == "main"
    missing = await tenant.client.put(
        "/v1/agents/upsert", json={"name": "desk"}, params={"project": "nope"}
    )
    assert_error(missing, 404, "project_not_found")


async def test_agent_upsert_disabled_agent_409_agent_disabled_unchanged(tenant: Tenant) -> None:
    made = await upsert(tenant, {"name": "desk", "system_prompt": "Kept."})
    assert (await tenant.client.post(f"/v1/agents/{made['id']}/disable")).status_code == 200
    refused = await tenant.client.put(
        "/v1/agents/upsert", json={"name": "desk", "system_prompt": "Lost."}
    )
    assert_error(refused, 409, "agent_disabled")
    kept = (await tenant.client.get(f"/v1/agents/{made['id']}")).json()["agent"]
    assert kept["system_prompt"] == "Kept."


async def test_agent_upsert_phone_number_of_another_agent_409(tenant: Tenant) -> None:
    await upsert(tenant, {"name": "one", "phone_numbers": ["+14155550100"]})
    taken = await tenant.client.put(
        "/v1/agents/upsert", json={"name": "two", "phone_numbers": ["+14155550100"]}
    )
    assert_error(taken, 409, "phone_number_taken")
    again = await upsert(tenant, {"name": "one", "phone_numbers": ["+14155550100"]})
    assert again["agent"]["phone_numbers"] == ["+14155550100"]


async def test_agent_upsert_concurrent_one_name_one_insert_the_rest_updates(
    tenant: Tenant,
) -> None:
    for round_number in range(3):
        name = f"race-{round_number}"
        bodies = [{"name": name, "system_prompt": f"writer {i}"} for i in range(WRITERS)]
        responses = await asyncio.gather(
            *(tenant.client.put("/v1/agents/upsert", json=body) for body in bodies)
        )
        assert [r.status_code for r in responses] == [200] * len(bodies), [
            r.text for r in responses
        ]
        answers = [r.json() for r in responses]
        assert sorted(a["inserted"] for a in answers) == [False] * (WRITERS - 1) + [True]
        assert len({a["id"] for a in answers}) == 1
    listed = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert sorted(a["name"] for a in listed) == ["race-0", "race-1", "race-2"]


async def test_agent_upsert_insert_that_loses_the_race_replaces_instead(
    tenant: Tenant, ctx: Context, database_url: str
) -> None:
    """Another writer inserts the name and holds its transaction open: the upsert waits on
    it (PostgreSQL: on the unique name, after finding nothing; SQLite: on the write lock),
    and once it commits the upsert replaces that agent."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            project_id = (
                await connection.execute(
                    select(ProjectRow.id).where(
                        ProjectRow.org_id == tenant.org.id, ProjectRow.name == "main"
                    )
                )
            ).scalar_one()
            now = utcnow(ctx.clock)
            other = new_id("agent")
            await connection.execute(
                insert(AgentRow).values(
                    id=other,
                    org_id=tenant.org.id,
                    project_id=project_id,
                    name="desk",
                    voice_id="us_female",
                    system_prompt="The other writer's.",
                    language="en",
                    audio_format="pcm_16000",
                    created_at=now,
                    updated_at=now,
                )
            )
            upserting = asyncio.create_task(
                tenant.client.put(
                    "/v1/agents/upsert", json={"name": "desk", "system_prompt": "Mine."}
                )
            )
            await asyncio.sleep(0.5)
            assert not upserting.done()  # it waits on the other writer
            await transaction.commit()
        response = await upserting
    finally:
        await engine.dispose()
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["id"], answer["inserted"], answer["updated"]) == (other, False, True)
    assert answer["agent"]["system_prompt"] == "Mine."
