"""A `reset` and an `add_system_message` on a live conversation (API.md section 17;
services/live/reset.py), through the session's codec seam without uvicorn (the doubles of
tests/services/test_live_session.py). Over a real server with the SDK:
tests/e2e/test_official_sdk_voice_calls.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from parley.services import Context
from tests.factories import make_agent
from tests.services.test_live_session import WAIT_SECONDS, Live, Start, start_sessions

pytestmark = pytest.mark.anyio


@pytest.fixture
async def start(ctx: Context) -> AsyncIterator[Start]:
    async with start_sessions(ctx) as begin:
        yield begin


async def calls_after(live: Live, frame: dict[str, Any], count: int) -> list[tuple[str, Any]]:
    """Send a frame; the engine calls it made, once there are `count` (bounded wait)."""
    before = len(live.engine.calls)
    live.socket.push(frame)
    for _ in range(round(WAIT_SECONDS / 0.01)):
        if len(live.engine.calls) - before >= count:
            break
        await asyncio.sleep(0.01)
    return live.engine.calls[before:]


async def refused(live: Live, config: dict[str, Any]) -> dict[str, Any]:
    """Send a reset that must be refused; its error, once the engine was left alone."""
    errors = len([m for m in live.socket.messages() if m["type"] == "error"])
    before = len(live.engine.calls)
    live.socket.push({"type": "reset", "config": config})
    for _ in range(round(WAIT_SECONDS / 0.01)):
        found = [m for m in live.socket.messages() if m["type"] == "error"]
        if len(found) > errors:
            assert live.engine.calls[before:] == []  # nothing of the reset applied
            return found[-1]
        await asyncio.sleep(0.01)
    raise AssertionError("no error")


async def test_reset_applies_prompt_tools_voice_and_silence(start: Start) -> None:
    live = await start()
    await live.configure()
    config = {"system_prompt": "Be chatty.", "voice_id": "us_male", "no_input_poke_sec": 5}
    calls = await calls_after(live, {"type": "reset", "config": config}, 3)
    assert calls == [
        ("update_system_prompt", "Be chatty."),
        ("update_tools", ()),
        ("change_voice", "us_male"),
    ]
    silence = live.session._silence
    assert silence is not None
    assert silence.settings.poke_sec == 5
    assert not [m for m in live.socket.messages() if m["type"] == "error"]


async def test_reset_omitted_members_take_the_agents_values(start: Start) -> None:
    live = await start()
    await live.configure(system_prompt="Be chatty.", voice_id="us_male")
    calls = await calls_after(live, {"type": "reset", "config": {"agent": live.agent}}, 3)
    assert calls == [
        ("update_system_prompt", "Be brief."),  # the agent's prompt, not the config's
        ("update_tools", ()),
        ("change_voice", "us_female"),
    ]


async def test_reset_another_agent_refused_nothing_applied(ctx: Context, start: Start) -> None:
    live = await start()
    await live.configure()
    other = await make_agent(ctx, live.org.org.id)
    error = await refused(live, {"agent": other.name, "system_prompt": "Be chatty."})
    assert error["error"]["code"] == "validation_error"
    assert set(error["param_errors"]) == {"agent"}


async def test_reset_other_format_refused_same_format_accepted(start: Start) -> None:
    live = await start()
    await live.configure(output_format="pcm_16000")
    error = await refused(live, {"output_format": "pcm_24000"})
    assert set(error["param_errors"]) == {"output_format"}
    calls = await calls_after(live, {"type": "reset", "config": {"output_format": "pcm_16000"}}, 2)
    assert calls[0] == ("update_system_prompt", "Be brief.")


async def test_reset_what_is_kept_refused_when_changed(start: Start) -> None:
    live = await start()
    await live.configure()
    error = await refused(
        live, {"data_retention_policy": {"zero_data_retention": True}, "enable_redaction": True}
    )
    assert set(error["param_errors"]) == {"data_retention_policy", "enable_redaction"}


async def test_reset_checked_as_config_unknown_tool_refused(start: Start) -> None:
    live = await start()
    await live.configure()
    error = await refused(live, {"tools": ["no_such_tool"]})
    assert error["error"]["code"] == "unknown_tool"


async def test_reset_before_config_refused_config_required(start: Start) -> None:
    live = await start()
    live.socket.push({"type": "reset", "config": {"system_prompt": "Hi."}})
    error = await live.socket.message("error")
    assert error["error"]["code"] == "config_required"


async def test_add_system_message_reaches_the_engine_no_reply_asked(start: Start) -> None:
    live = await start()
    await live.configure()
    frame = {"type": "add_system_message", "system_message": "The caller is a member."}
    calls = await calls_after(live, frame, 1)
    assert calls == [("add_system_message", "The caller is a member.")]
    live.socket.push({"type": "add_system_message", "system_message": ""})
    error = await live.socket.message("error")
    assert "system_message" in error["param_errors"]
