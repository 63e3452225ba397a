"""An agent's `enable_redaction` (API.md section 16): off by default, created, read, listed
and patched like every other field; null and non-booleans refused."""

from __future__ import annotations

from typing import Any

import pytest
from tests.conftest import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


async def test_agent_enable_redaction_default_false(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    assert agent["enable_redaction"] is False


async def test_agent_enable_redaction_created_read_listed_and_patched(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, enable_redaction=True)
    assert agent["enable_redaction"] is True
    got = await tenant.client.get(f"/v1/agents/{agent['id']}")
    assert got.json()["agent"]["enable_redaction"] is True
    listed = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert [a["enable_redaction"] for a in listed if a["id"] == agent["id"]] == [True]
    patched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"enable_redaction": False}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["agent"]["enable_redaction"] is False
    untouched = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"name": "renamed"})
    assert untouched.json()["agent"]["enable_redaction"] is False


@pytest.mark.parametrize("value", [None, "yes", 2, {"on": True}])
async def test_agent_enable_redaction_not_a_boolean_400(
    tenant: Tenant, make_agent: MakeAgent, value: Any
) -> None:
    agent = await make_agent(tenant, enable_redaction=True)
    answer = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"enable_redaction": value}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "validation_error"
    assert answer.json()["param_errors"].keys() == {"enable_redaction"}
    unchanged = await tenant.client.get(f"/v1/agents/{agent['id']}")
    assert unchanged.json()["agent"]["enable_redaction"] is True
