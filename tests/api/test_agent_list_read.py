"""GET /v1/agents reads a page of agents, their projects' names and their phone numbers with
one statement, outside any transaction (issue #11: the fast request path)."""

from __future__ import annotations

import pytest
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


async def test_agent_list_one_statement_limit_counts_agents_numbers_in_order(
    tenant: Tenant, make_agent: MakeAgent, statements: list[str]
) -> None:
    numbers = ["+14155550111", "+14155550112", "+14155550113"]
    first = await make_agent(tenant, phone_numbers=numbers)
    second = await make_agent(tenant, phone_numbers=["+14155550114"])
    third = await make_agent(tenant)
    assert (await tenant.client.get("/v1/agents")).status_code == 200  # the key is now known
    statements.clear()
    page = await tenant.client.get("/v1/agents", params={"limit": 2})
    assert page.status_code == 200, page.text
    body = page.json()
    assert [(a["name"], a["phone_numbers"]) for a in body["agents"]] == [
        (first["name"], numbers),
        (second["name"], ["+14155550114"]),
    ]
    assert {a["project"]["name"] for a in body["agents"]} == {"main"}
    assert [s.split()[0].upper() for s in statements] == ["SELECT"], statements
    rest = await tenant.client.get("/v1/agents", params={"limit": 2, "cursor": body["next_cursor"]})
    assert [(a["name"], a["phone_numbers"]) for a in rest.json()["agents"]] == [(third["name"], [])]
    assert rest.json()["next_cursor"] is None


async def test_agent_list_in_one_project_still_resolves_it(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    listed = await tenant.client.get("/v1/agents", params={"project": "main"})
    assert [a["name"] for a in listed.json()["agents"]] == [agent["name"]]
    missing = await tenant.client.get("/v1/agents", params={"project": "nowhere"})
    assert missing.status_code == 404, missing.text
