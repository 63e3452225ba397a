"""An agent's `data_retention_policy` (API.md section 16), in the official SDK's shape."""

from __future__ import annotations

from typing import Any

import pytest
from tests.conftest import MakeAgent, Tenant

pytestmark = pytest.mark.anyio

DEFAULT = {
    "zero_data_retention": False,
    "transcripts": {"delete_after_hours": None},
    "audio_recordings": {"delete_after_hours": None},
}


async def test_agent_data_retention_policy_default_keeps_everything(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    assert agent["data_retention_policy"] == DEFAULT


@pytest.mark.parametrize(
    "policy",
    [
        {"zero_data_retention": True},
        {
            "zero_data_retention": False,
            "transcripts": {"delete_after_hours": 0},
            "audio_recordings": {"delete_after_hours": 720},
        },
    ],
    ids=["zero", "windows"],
)
async def test_agent_data_retention_policy_created_read_and_patched(
    tenant: Tenant, make_agent: MakeAgent, policy: dict[str, Any]
) -> None:
    agent = await make_agent(tenant, data_retention_policy=policy)
    assert agent["data_retention_policy"] == policy
    got = await tenant.client.get(f"/v1/agents/{agent['id']}")
    assert got.json()["agent"]["data_retention_policy"] == policy
    patched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"data_retention_policy": {"transcripts": {}}}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["agent"]["data_retention_policy"] == DEFAULT


@pytest.mark.parametrize(
    "policy",
    [
        {"zero_data_retention": True, "transcripts": {"delete_after_hours": 1}},
        {"transcripts": {"delete_after_hours": -1}},
        {"audio_recordings": {"delete_after_hours": 87_601}},
        {"transcripts": {"delete_after_hours": "soon"}},
        {"zero_data_retention": "yes"},
        {"keep": True},
    ],
)
async def test_agent_data_retention_policy_bad_shape_400(
    tenant: Tenant, make_agent: MakeAgent, policy: dict[str, Any]
) -> None:
    agent = await make_agent(tenant)
    answer = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"data_retention_policy": policy}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "validation_error"
    unchanged = await tenant.client.get(f"/v1/agents/{agent['id']}")
    assert unchanged.json()["agent"]["data_retention_policy"] == DEFAULT
