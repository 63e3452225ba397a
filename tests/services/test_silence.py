"""Silence (API.md section 15): the timer's rules against a clock the tests move (no
waiting), the settings a `config` makes of its agent's, and the session ending at the
limit with `ended_by` `assistant_silence_limit_reached` and one `conversation.ended`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from parley import engine
from parley.errors import ValidationFailed
from parley.records import OPERATOR, Agent, AgentPatch
from parley.services import Context, agents
from parley.services.live import codec
from parley.services.live.silence import POKE_START_LIMIT_S, SilenceTimer, settings_for
from parley.services.silence import DEFAULT_POKE_TEXT, SilenceSettings
from tests.factories import make_agent, unique_name
from tests.services.test_endings import ended_once, listening_org
from tests.services.test_live_session import start_sessions
from tests.services.webhook_helpers import local_context


@pytest.fixture
async def ctx(database_url: str) -> AsyncIterator[Context]:
    async with local_context(database_url, instance_id=unique_name("silence")) as context:
        yield context


class StoppedClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


def timer(
    poke: int | None = 5, end: int | None = 20, *, pending: list[bool] | None = None
) -> tuple[SilenceTimer, StoppedClock]:
    clock = StoppedClock()
    flags = pending if pending is not None else [False]
    made = SilenceTimer(
        SilenceSettings(poke_sec=poke, end_sec=end), clock, playback_pending=lambda: flags[0]
    )
    made.start()
    return made, clock


def spoke(silence: SilenceTimer, clock: StoppedClock, seconds: float) -> None:
    """The agent speaks for `seconds`."""
    silence.observe(engine.AssistantStartedSpeaking())
    clock.now += seconds
    silence.observe(engine.AssistantFinishedSpeaking())


def test_poke_due_after_poke_sec_of_silence_not_before() -> None:
    silence, clock = timer(poke=5)
    assert silence.due(clock.now + 4.9) is None
    assert silence.due(clock.now + 5) == "poke"
    assert silence.next_at() == clock.now + 5


def test_silence_counts_from_the_end_of_the_agents_speech() -> None:
    silence, clock = timer(poke=5)
    clock.now += 4
    silence.observe(engine.AssistantStartedSpeaking())
    clock.now += 30  # a long reply: no count while the agent speaks
    assert silence.due(clock.now) is None
    assert silence.next_at() is None
    silence.observe(engine.AssistantFinishedSpeaking())
    assert silence.due(clock.now + 4.9) is None
    assert silence.due(clock.now + 5) == "poke"


def test_poke_spoken_once_per_silence() -> None:
    silence, clock = timer(poke=5, end=None)
    clock.now += 5
    assert silence.due(clock.now) == "poke"
    silence.poking()
    spoke(silence, clock, 1.5)
    clock.now += 100
    assert silence.due(clock.now) is None
    assert silence.next_at() is None


def test_user_speech_holds_the_count_and_starts_a_new_silence() -> None:
    silence, clock = timer(poke=5, end=20)
    clock.now += 5
    silence.poking()
    spoke(silence, clock, 1)
    clock.now += 3
    silence.observe(engine.UserStartedSpeaking())
    clock.now += 60  # the user talks on: nothing counts
    assert silence.due(clock.now) is None
    silence.observe(engine.UserFinishedSpeaking())
    spoke(silence, clock, 2)  # the agent's answer
    assert silence.due(clock.now + 4.9) is None
    assert silence.due(clock.now + 5) == "poke"  # a new silence: a new poke


def test_typed_words_start_a_new_silence() -> None:
    silence, clock = timer(poke=5, end=None)
    clock.now += 5
    silence.poking()
    spoke(silence, clock, 1)
    clock.now += 10
    silence.user_acted()
    assert silence.due(clock.now + 5) == "poke"


def test_end_counted_from_the_end_of_the_poke() -> None:
    silence, clock = timer(poke=5, end=8)
    clock.now += 5
    silence.poking()
    spoke(silence, clock, 2)  # the poke ends 7 s into the silence
    assert silence.due(clock.now + 7.9) is None
    assert silence.due(clock.now + 8) == "end"


def test_end_waits_for_a_queued_poke_to_be_spoken() -> None:
    """A poke whose speech starts late (a loaded machine's synthesis) is still heard before
    the end: the count holds from the poke's queueing until its speech has ended."""
    silence, clock = timer(poke=1, end=2)
    clock.now += 1
    silence.poking()
    clock.now += 5  # queued, not yet speaking
    assert silence.due(clock.now) is None
    spoke(silence, clock, 1)
    assert silence.due(clock.now + 1.9) is None
    assert silence.due(clock.now + 2) == "end"


def test_poke_that_never_starts_speaking_counts_as_said_after_its_limit() -> None:
    silence, clock = timer(poke=1, end=2)
    clock.now += 1
    silence.poking()
    assert silence.next_at() == clock.now + POKE_START_LIMIT_S
    assert silence.due(clock.now + POKE_START_LIMIT_S - 0.1) is None
    clock.now += POKE_START_LIMIT_S
    assert silence.due(clock.now) is None  # the count starts now, once
    assert silence.due(clock.now + 2) == "end"


def test_poke_refused_by_the_engine_counts_on_from_then() -> None:
    silence, clock = timer(poke=1, end=2)
    clock.now += 1
    silence.poking()
    clock.now += 0.5
    silence.poke_refused()
    assert silence.due(clock.now + 1.9) is None  # said once: no second poke
    assert silence.due(clock.now + 2) == "end"


def test_end_before_poke_when_shorter() -> None:
    silence, clock = timer(poke=30, end=10)
    assert silence.due(clock.now + 10) == "end"


def test_count_waits_for_the_wire_to_play_the_last_audio() -> None:
    pending = [True]
    silence, clock = timer(poke=5, pending=pending)
    spoke(silence, clock, 1)  # the engine is done, the carrier still plays it
    clock.now += 10
    assert silence.due(clock.now) is None
    silence.played()  # a mark, more audio still queued
    assert silence.due(clock.now) is None
    pending[0] = False
    silence.played()
    assert silence.due(clock.now + 4.9) is None
    assert silence.due(clock.now + 5) == "poke"


def test_null_settings_never_due() -> None:
    silence, clock = timer(poke=None, end=None)
    assert not silence.settings.active
    assert silence.due(clock.now + 10_000) is None
    assert silence.next_at() is None


@pytest.mark.anyio
async def test_reconfigured_from_off_to_on_the_timer_starts_counting() -> None:
    """A `reset` may turn silence options on mid-conversation (API.md section 17)."""
    silence, clock = timer(poke=None, end=None)
    pokes: list[str] = []

    async def poke(text: str) -> bool:
        pokes.append(text)
        return True

    running = asyncio.create_task(silence.run(poke))
    await asyncio.sleep(0.02)
    assert pokes == []
    silence.reconfigure(SilenceSettings(poke_sec=5, poke_text="Still there?", end_sec=None))
    clock.now += 5  # the silence under way keeps its start
    await asyncio.sleep(0.05)
    running.cancel()
    assert pokes == ["Still there?"]


# --- the settings of a config ---------------------------------------------------------------


@pytest.mark.anyio
async def test_config_overrides_the_agents_silence_settings(ctx: Context) -> None:
    org = await listening_org(ctx)
    made = await agents_with_silence(ctx, org.org.id)
    assert settings_for(made, codec.Configure(agent=made.name)) == SilenceSettings(
        poke_sec=10, poke_text="Hello?", end_sec=30
    )
    overridden = codec.Configure(
        agent=made.name, no_input_poke_sec=None, no_input_end_conversation_sec=5
    )
    assert settings_for(made, overridden) == SilenceSettings(
        poke_sec=None, poke_text="Hello?", end_sec=5
    )


@pytest.mark.anyio
async def test_config_silence_out_of_range_refused_naming_the_option(ctx: Context) -> None:
    org = await listening_org(ctx)
    made = await agents_with_silence(ctx, org.org.id)
    with pytest.raises(ValidationFailed) as refused:
        settings_for(made, codec.Configure(agent=made.name, no_input_end_conversation_sec=3601))
    assert list(refused.value.param_errors or {}) == ["no_input_end_conversation_sec"]


async def agents_with_silence(ctx: Context, org_id: str) -> Agent:
    made = await make_agent(ctx, org_id)
    return await agents.update_agent(
        ctx,
        org_id=org_id,
        ref=made.id,
        project=None,
        patch=AgentPatch(
            no_input_poke_sec=10, no_input_poke_text="Hello?", no_input_end_conversation_sec=30
        ),
        actor=OPERATOR,
    )


@pytest.mark.anyio
async def test_agent_silence_out_of_range_refused_naming_the_field(ctx: Context) -> None:
    org = await listening_org(ctx)
    with pytest.raises(ValidationFailed) as refused:
        await agents.update_agent(
            ctx,
            org_id=org.org.id,
            ref=(await agents_with_silence(ctx, org.org.id)).id,
            project=None,
            patch=AgentPatch(no_input_poke_sec=0, no_input_poke_text=" "),
            actor=OPERATOR,
        )
    assert sorted(refused.value.param_errors or {}) == ["no_input_poke_sec", "no_input_poke_text"]


# --- the session ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_silence_limit_ends_conversation_sending_conversation_ended_once(
    ctx: Context,
) -> None:
    org = await listening_org(ctx)
    async with start_sessions(ctx) as start:
        live = await start(org=org)
        conversation_id = await live.configure(no_input_end_conversation_sec=1)
        assert await live.closed() == (1000, "conversation ended")
    assert await ended_once(ctx, org.org.id, conversation_id) == "assistant_silence_limit_reached"


@pytest.mark.anyio
async def test_poke_said_through_the_engine_once(ctx: Context) -> None:
    org = await listening_org(ctx)
    async with start_sessions(ctx) as start:
        live = await start(org=org)
        await live.configure(no_input_poke_sec=1, no_input_end_conversation_sec=2)
        recorded = live.engine.say

        async def spoken(text: str) -> None:  # the poke spoken at once, as an engine would
            await recorded(text)
            live.engine.push(engine.AssistantStartedSpeaking())
            live.engine.push(engine.AssistantFinishedSpeaking())

        live.engine.say = spoken  # type: ignore[method-assign]
        await asyncio.wait_for(live.task, 6)  # the poke at 1 s, the end 2 s after it
        assert live.socket.closed == (1000, "conversation ended")
        assert live.engine.calls == [("say", DEFAULT_POKE_TEXT)]


@pytest.mark.anyio
async def test_poke_refused_by_a_full_queue_still_ends_at_the_silence_limit(
    ctx: Context,
) -> None:
    """A poke the engine cannot queue (8 responses waiting) is not an internal error."""
    org = await listening_org(ctx)
    async with start_sessions(ctx) as start:
        live = await start(org=org)

        async def full(text: str) -> None:
            raise engine.TooManyPendingResponses()

        live.socket.push({"type": "config", "agent": live.agent, "no_input_poke_sec": 1,
                          "no_input_end_conversation_sec": 2})  # fmt: skip
        await live.socket.message("conversation_created")
        live.engine.say = full  # type: ignore[method-assign]
        await live.socket.message("ready_to_start_conversation")
        await asyncio.wait_for(live.task, 6)
        assert live.socket.closed == (1000, "conversation ended")
