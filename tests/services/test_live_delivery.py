"""The delivery members on the socket (API.md section 17, the SDK's `ConfigOptions`): the
agent's reach the engine, a `config` sets each for its conversation (null: the default for
`timezone` and the VAD members, the agent's for the others), and a value out of its rule is
an `error` naming it, the socket open and nothing live. LiveSession in-process with a
scripted engine (tests/services/test_live_session.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from parley.engine import AgentTuning
from parley.records import OPERATOR, AgentPatch, Delivery, DeliveryPatch, PronunciationEntry
from parley.services import Context, agents
from tests.factories import make_agent, make_org
from tests.services.test_live_session import Start, start_sessions

pytestmark = pytest.mark.anyio

AGENT_DELIVERY = Delivery(
    generate_welcome_message=True,
    is_welcome_message_interruptible=False,
    audio_speed=1.5,
    timezone="Europe/Berlin",
    pronunciation_dictionary=(PronunciationEntry("Acme", "Ack-mee"),),
    vad_min_silence_duration_ms=800,
    vad_threshold=0.6,
)
AGENT_TUNING = AgentTuning(
    generate_welcome=True,
    welcome_interruptible=False,
    speed=1.5,
    timezone="Europe/Berlin",
    pronunciations=(("Acme", "Ack-mee"),),
    vad_threshold=0.6,
    end_silence_ms=800,
)


@pytest.fixture
async def start(ctx: Context) -> AsyncIterator[Start]:
    async with start_sessions(ctx) as begin:
        yield begin


async def tuned_agent(ctx: Context, org_id: str) -> str:
    agent = await make_agent(ctx, org_id)
    whole = {name: getattr(AGENT_DELIVERY, name) for name in Delivery.__slots__}
    patch = AgentPatch(delivery=DeliveryPatch(**whole))
    await agents.update_agent(
        ctx, org_id=org_id, ref=agent.id, project=None, patch=patch, actor=OPERATOR
    )
    return agent.name


async def test_session_agent_delivery_reaches_the_engine(ctx: Context, start: Start) -> None:
    org = await make_org(ctx)
    live = await start(org=org, agent=await tuned_agent(ctx, org.org.id))
    await live.configure()
    assert live.engine.config.tuning == AGENT_TUNING


async def test_session_config_delivery_members_set_for_the_conversation(
    ctx: Context, start: Start
) -> None:
    org = await make_org(ctx)
    live = await start(org=org, agent=await tuned_agent(ctx, org.org.id))
    await live.configure(
        generate_welcome_message=False,
        is_welcome_message_interruptible=None,  # null: the agent's
        audio_speed=0.75,
        timezone=None,  # null: no time told
        pronunciation_dictionary=[{"word": "SQL", "pronunciation": "sequel"}],
        vad_min_silence_duration_ms=1200,
        vad_threshold=None,
    )
    assert live.engine.config.tuning == AgentTuning(
        generate_welcome=False,
        welcome_interruptible=False,
        speed=0.75,
        timezone=None,
        pronunciations=(("SQL", "sequel"),),
        vad_threshold=None,
        end_silence_ms=1200,
    )


OUT_OF_RULE: list[tuple[str, object]] = [
    ("audio_speed", 2.5),
    ("timezone", "Atlantis/Capital"),
    ("vad_min_silence_duration_ms", 50),
    ("vad_threshold", 1.0),
    (
        "pronunciation_dictionary",
        [{"word": "a", "pronunciation": "x"}, {"word": "A", "pronunciation": "y"}],
    ),
    ("audio_speed", "fast"),
]


async def test_session_config_delivery_out_of_rule_error_naming_it_nothing_live(
    start: Start,
) -> None:
    live = await start()
    for member, value in OUT_OF_RULE:
        live.socket.sent.clear()
        live.socket.push({"type": "config", "agent": live.agent, member: value})
        error = await live.socket.message("error")
        assert error["error"]["code"] == "validation_error", (member, error)
        assert member in error["param_errors"], (member, error)
    assert live.factory.engines == []
    live.socket.sent.clear()
    await live.configure()  # the socket stayed open: a good config starts it
    assert live.engine.config.tuning == AgentTuning()
