"""The `config` option `external_storage_policy` (API.md section 16): parsed by Parley's
codec, resolved when the conversation starts (`Setup.storage_policy_id`: the config's
policy, else the agent's), an unknown name refused with an `error` frame."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.errors import ValidationFailed
from parley.records import OPERATOR, UNSET, AgentPatch, StoragePolicySpec
from parley.services import Context, agents, storage_policies
from parley.services.live import codec
from parley.services.live.setup import Setup
from parley.wires.parley_codec import ParleyCodec
from tests.factories import make_agent, make_org
from tests.services.test_live_session import start_sessions

pytestmark = pytest.mark.anyio


def configure(**fields: Any) -> codec.Configure:
    frame = json.dumps({"type": "config", "agent": "support", **fields})
    (event,) = ParleyCodec().decode(frame)
    assert isinstance(event, codec.Configure)
    return event


def test_codec_config_external_storage_policy_omitted_null_or_named() -> None:
    assert configure().external_storage_policy is UNSET
    assert configure(external_storage_policy=None).external_storage_policy is None
    assert configure(external_storage_policy="archive").external_storage_policy == "archive"
    with pytest.raises(ValidationFailed) as refused:
        configure(external_storage_policy="")
    assert refused.value.param_errors is not None
    assert "external_storage_policy" in refused.value.param_errors


async def make_policy(ctx: Context, org_id: str, name: str) -> str:
    spec = StoragePolicySpec(
        name=name,
        endpoint_url="https://s3.example.com",
        bucket="parley-recordings",
        access_key_id="AKIAPARLEYTEST",
        secret_access_key="secret",
    )
    made = await storage_policies.create_policy(
        ctx, org_id=org_id, project=None, spec=spec, actor=OPERATOR
    )
    return made.id


async def test_setup_storage_policy_id_config_overrides_the_agents(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    archive, vault = (
        await make_policy(ctx, org_id, "archive"),
        await make_policy(ctx, org_id, "vault"),
    )
    made = await make_agent(ctx, org_id)
    await agents.update_agent(
        ctx,
        org_id=org_id,
        ref=made.id,
        project=None,
        patch=AgentPatch(external_storage_policy="archive"),
        actor=OPERATOR,
    )
    agent = await agents.get_agent(ctx, org_id=org_id, ref=made.id, project=None)

    async def chosen(**fields: Any) -> str | None:
        return (await Setup.check(ctx, configure(**fields), agent)).storage_policy_id

    assert await chosen() == archive
    assert await chosen(external_storage_policy="vault") == vault
    assert await chosen(external_storage_policy=None) is None
    with pytest.raises(ValidationFailed) as refused:
        await chosen(external_storage_policy="nowhere")
    assert refused.value.param_errors is not None
    assert set(refused.value.param_errors) == {"external_storage_policy"}


async def test_session_config_unknown_external_storage_policy_error_frame_validation_error(
    ctx: Context,
) -> None:
    async with start_sessions(ctx) as start:
        live = await start()
        await make_policy(ctx, live.org.org.id, "archive")
        live.socket.push(
            {"type": "config", "agent": live.agent, "external_storage_policy": "nowhere"}
        )
        error = await live.socket.message("error")
        assert error["error"]["code"] == "validation_error"
        assert set(error["param_errors"]) == {"external_storage_policy"}
        assert live.factory.engines == []
        assert live.socket.closed is None  # a refused config may be sent again

        await live.configure(external_storage_policy="archive")
        assert len(live.factory.engines) == 1
