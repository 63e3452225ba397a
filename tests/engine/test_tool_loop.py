"""The tool loop of API.md section 12, through DefaultEngine and a real OpenAI-protocol server.

The model is tests/llm_server.py on loopback (scripted rounds of words and streamed tool
calls), the replier is the real ChatCompletionReplies, and the tools run in a recording
runner that answers after a delay.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from tests import speech
from tests.engine.conftest import ToneSynthesizer
from tests.engine.recorder import Recorder
from tests.llm_server import Call, ChatServer, Round, running_chat_server

from parley.engine import (
    END_CONVERSATION_TOOL,
    HOLDING_LINE_AFTER_S,
    AssistantEndedConversation,
    AssistantFinishedSpeaking,
    AssistantStartedSpeaking,
    AudioChunk,
    ChatCompletionReplies,
    ConversationEngine,
    DefaultEngineFactory,
    EngineSettings,
    EngineWarning,
    InterruptedResponse,
    Samples,
    SessionConfig,
    Synthesizer,
    ToolCallInterrupted,
    ToolDefinition,
    ToolInvocation,
    UserStartedSpeaking,
)
from parley.engine.tool_loop import HOLDING_LINE, SPEECH_BEFORE_TOOL

pytestmark = pytest.mark.anyio

FAST = EngineSettings(playback_lead_s=None)
PACED = EngineSettings(playback_lead_s=0.05)
ANSWER = ["Sure. ", "Your table ", "is booked."]  # the server's answer once the tools are done
ANSWER_SENTENCES = ["Sure.", "Your table is booked."]

ORDER = ToolDefinition(
    name="get_order",
    description="Look up an order by its number.",
    parameters={
        "type": "object",
        "properties": {"number": {"type": "integer"}},
        "required": ["number"],
        "additionalProperties": False,
    },
)
REFUND = ToolDefinition(
    name="start_refund",
    description="Start a refund; it takes a while.",
    parameters={"type": "object", "properties": {}},
    execution_mode="async",
)
CAREFUL = dataclasses.replace(ORDER, name="cancel_order", require_speech_before_tool_call=True)
ENDING = ToolDefinition(
    name=END_CONVERSATION_TOOL,
    description="End the conversation when the caller is done.",
    parameters={"type": "object", "properties": {}},
)
TOOLS = (ORDER, REFUND, CAREFUL, ENDING)


class RecordingRunner:
    """Records each call and the events seen when it started; answers after a delay."""

    def __init__(
        self,
        recorder: Recorder,
        delays: Mapping[str, float] | None = None,
        failing: frozenset[str] = frozenset(),
    ) -> None:
        self.recorder = recorder
        self.delays = dict(delays or {})
        self.failing = failing
        self.calls: list[ToolInvocation] = []
        self.called_at: list[float] = []
        self.seen_at_start: list[list[object]] = []
        self.answered_at_start: list[int] = []
        self.answered: list[str] = []
        self.called = anyio.Event()
        self.all_answered = anyio.Event()

    async def run(self, call: ToolInvocation) -> Any:
        self.calls.append(call)
        self.called_at.append(anyio.current_time())
        self.seen_at_start.append(list(self.recorder.events))
        self.answered_at_start.append(len(self.answered))
        self.called.set()
        await anyio.sleep(self.delays.get(call.name, 0.0))
        if call.name in self.failing:
            raise RuntimeError("the runner broke its promise never to raise")
        self.answered.append(call.id)
        if len(self.answered) == len(self.calls):
            self.all_answered.set()
        return {"tool": call.name, "arguments": dict(call.arguments), "status": "done"}

    async def wait_answered(self) -> None:
        with anyio.fail_after(10):
            await self.all_answered.wait()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        server.script.reply = list(ANSWER)
        yield server


@asynccontextmanager
async def conversation(
    chat: ChatServer,
    synthesizer: Synthesizer,
    config: SessionConfig,
    *,
    delays: Mapping[str, float] | None = None,
    failing: frozenset[str] = frozenset(),
    settings: EngineSettings = FAST,
) -> AsyncIterator[tuple[ConversationEngine, Recorder, RecordingRunner]]:
    replies = ChatCompletionReplies(base_url=chat.base_url, api_key="k", model="m")
    factory = DefaultEngineFactory(synthesizer, replies=replies, settings=settings)
    recorder = Recorder()
    runner = RecordingRunner(recorder, delays, failing)
    config = dataclasses.replace(config, tools=TOOLS)
    try:
        async with (
            factory.create(config, tool_runner=runner) as engine,
            anyio.create_task_group() as group,
        ):
            group.start_soon(recorder.consume, engine)
            yield engine, recorder, runner
            await engine.close()
    finally:
        await replies.aclose()


def tool_messages(chat: ChatServer, request: int) -> dict[str, Any]:
    """The `tool` messages of one request to the model, by call ID, their content parsed."""
    messages = chat.requests[request].body["messages"]
    return {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}


def warnings(recorder: Recorder) -> list[str]:
    return [event.code for event in recorder.events if isinstance(event, EngineWarning)]


def order_call(number: object = 42, call_id: str = "call_a") -> Call:
    return Call("get_order", [json.dumps({"number": number})], id=call_id)


async def test_sync_tool_output_given_to_model_which_is_asked_again(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[Call("get_order", ['{"num', 'ber": 42}'], "call_a")]))
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="Where is order 42?")
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert runner.calls == [ToolInvocation("call_a", "get_order", {"number": 42})]
    first, second = chat.requests
    assert [tool["function"]["name"] for tool in first.body["tools"]] == [t.name for t in TOOLS]
    assert tool_messages(chat, 1) == {
        "call_a": {"tool": "get_order", "arguments": {"number": 42}, "status": "done"}
    }
    assert second.body["messages"][-2]["tool_calls"][0]["id"] == "call_a"
    assert recorder.sentences() == ANSWER_SENTENCES
    assert recorder.kinds() == [AssistantStartedSpeaking, AudioChunk, AssistantFinishedSpeaking]


async def test_words_before_tool_call_spoken_while_tool_runs(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(text=["Let me ", "look"], calls=[order_call()]))
    delays = {"get_order": 0.5}
    async with conversation(chat, tone_synthesizer, config, delays=delays) as (e, rec, _):
        await e.generate_reply(user_message="Where is order 42?")
        await rec.wait_for(AssistantFinishedSpeaking)
    # "Let me look" has no full stop: the call ends it, and it is spoken before the answer.
    assert rec.sentences() == ["Let me look", *ANSWER_SENTENCES]
    times = rec.sentence_times()
    assert times["Sure."] - times["Let me look"] >= 0.45  # said while the tool ran


async def test_parallel_calls_all_run_and_all_outputs_given_to_model(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[order_call(1, "call_a"), order_call(2, "call_b")]))
    delays = {"get_order": 0.3}
    async with conversation(chat, tone_synthesizer, config, delays=delays) as (e, rec, runner):
        await e.generate_reply(user_message="Orders 1 and 2?")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert [call.arguments for call in runner.calls] == [{"number": 1}, {"number": 2}]
    assert runner.answered_at_start == [0, 0]  # side by side, not one after the other
    assert set(tool_messages(chat, 1)) == {"call_a", "call_b"}


async def test_require_speech_before_tool_call_short_line_when_model_silent(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[Call("cancel_order", ['{"number": 7}'], "call_c")]))
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="Cancel order 7.")
        await recorder.wait_for(AssistantFinishedSpeaking)
    (seen,) = runner.seen_at_start
    assert AssistantStartedSpeaking() in seen
    assert AudioChunk in {type(event) for event in seen}
    assert recorder.sentences() == [SPEECH_BEFORE_TOOL, *ANSWER_SENTENCES]


async def test_require_speech_before_tool_call_model_words_start_first(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    call = Call("cancel_order", ['{"number": 7}'], "call_c")
    chat.script.rounds.append(Round(text=["I will cancel it now."], calls=[call]))
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="Cancel order 7.")
        await recorder.wait_for(AssistantFinishedSpeaking)
    (seen,) = runner.seen_at_start
    spoken = [e.text for e in seen if isinstance(e, AudioChunk) and e.text]
    assert spoken == ["I will cancel it now."]
    assert SPEECH_BEFORE_TOOL not in recorder.sentences()


async def test_async_tool_model_gets_started_then_output_replaces_it_without_new_reply(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[Call("start_refund", ["{}"], "call_r")]))
    delays = {"start_refund": 0.6}
    async with conversation(chat, tone_synthesizer, config, delays=delays) as (e, rec, runner):
        await e.generate_reply(user_message="Refund me.")
        await rec.wait_for(AssistantFinishedSpeaking)
        assert tool_messages(chat, 1) == {"call_r": {"status": "started"}}
        assert runner.answered == []  # the reply did not wait for it
        await runner.wait_answered()
        await anyio.sleep(0.2)
        assert len(chat.requests) == 2  # its output asked for no new reply
        await e.generate_reply(user_message="Is it done?")
        await rec.wait_for(AssistantFinishedSpeaking, count=2)
    assert tool_messages(chat, 2) == {
        "call_r": {"tool": "start_refund", "arguments": {}, "status": "done"}
    }


async def test_tool_rounds_capped_at_five_then_model_asked_without_tools(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.forever = Round(calls=[Call("get_order", ['{"number": 1}'])])  # no ids
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="Loop, please.")
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert ["tools" in request.body for request in chat.requests] == [True] * 5 + [False]
    assert len(runner.calls) == 5
    assert len({call.id for call in runner.calls}) == 5  # generated IDs, each distinct
    assert len(tool_messages(chat, 5)) == 5
    assert warnings(recorder) == ["tool_rounds_exceeded"]
    assert recorder.sentences() == ANSWER_SENTENCES  # the turn ends in words


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        pytest.param(Call("get_order", ['{"number": '], "c1"), "not valid JSON", id="broken-json"),
        pytest.param(order_call("forty-two", "c1"), "is not of type 'integer'", id="wrong-type"),
        pytest.param(
            Call("get_order", ['{"number": 1, "rush": true}'], "c1"),
            "Additional properties are not allowed",
            id="invented-parameter",
        ),
        pytest.param(Call("get_order", ["{}"], "c1"), "'number' is a required", id="missing"),
        pytest.param(Call("get_order", ["[1]"], "c1"), "must be a JSON object", id="not-object"),
        pytest.param(Call("drop_tables", ["{}"], "c1"), "unknown tool", id="unknown-tool"),
    ],
)
async def test_invalid_tool_call_gets_error_output_and_warning_conversation_goes_on(
    chat: ChatServer,
    tone_synthesizer: Synthesizer,
    config: SessionConfig,
    call: Call,
    reason: str,
) -> None:
    chat.script.rounds.append(Round(calls=[call]))
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="Order?")
        await recorder.wait_for(AssistantFinishedSpeaking)
        await engine.say("Still here.")
        await recorder.wait_for(AssistantFinishedSpeaking, count=2)
    assert runner.calls == []
    output = tool_messages(chat, 1)["c1"]
    assert reason in output["error"]
    assert warnings(recorder) == ["tool_call_invalid"]
    assert recorder.sentences() == [*ANSWER_SENTENCES, "Still here."]


async def test_holding_line_when_sync_tool_silent_for_1_5_s(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[order_call()]))
    delays = {"get_order": 2.5}
    async with conversation(chat, tone_synthesizer, config, delays=delays) as (e, rec, _):
        start = anyio.current_time()
        await e.generate_reply(user_message="Where is order 42?")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert rec.sentences() == [HOLDING_LINE, *ANSWER_SENTENCES]
    assert 1.5 <= rec.sentence_times()[HOLDING_LINE] - start < 2.2


async def test_no_holding_line_for_a_sync_tool_answering_within_1_5_s(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[order_call()]))
    delays = {"get_order": 1.0}
    async with conversation(chat, tone_synthesizer, config, delays=delays) as (e, rec, _):
        await e.generate_reply(user_message="Where is order 42?")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert rec.sentences() == ANSWER_SENTENCES


HELLO = "Hello, I need some help with my order."
LONG = "Let me pull up that order for you, it may take a little while to find it. " * 2
"""About 1.9 s of tone (60 ms a word): still playing 1.5 s after the call."""


async def test_holding_line_after_earlier_speech_ends_when_tool_still_silent(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    """Timed from the call and from the earlier speech's last chunk, not from the request:
    on a loaded machine the model's first round alone took a second (CI)."""
    chat.script.rounds.append(Round(text=[LONG], calls=[order_call()]))
    delays = {"get_order": 3.0}
    async with conversation(chat, tone_synthesizer, config, delays=delays, settings=PACED) as (
        e,
        rec,
        runner,
    ):
        await e.generate_reply(user_message="Where is order 42?")
        await rec.wait_for(AssistantFinishedSpeaking)
    sentences = rec.sentences()
    assert sentences[-3:] == [HOLDING_LINE, *ANSWER_SENTENCES]
    held = rec.sentence_times()[HOLDING_LINE]
    called = runner.called_at[0]
    speech_chunks = [
        at
        for event, at in zip(rec.events, rec.times, strict=True)
        if isinstance(event, AudioChunk) and at < held
    ]
    assert held - called >= HOLDING_LINE_AFTER_S  # never before 1.5 s of the tool's silence
    assert 0.0 <= held - max(speech_chunks) < 0.9  # right after that speech ended
    assert held < called + delays["get_order"]  # while the tool was still silent


async def test_no_holding_line_when_tool_answers_while_earlier_speech_plays(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(text=[LONG], calls=[order_call()]))
    delays = {"get_order": 1.6}
    async with conversation(chat, tone_synthesizer, config, delays=delays, settings=PACED) as (
        e,
        rec,
        _,
    ):
        await e.generate_reply(user_message="Where is order 42?")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert HOLDING_LINE not in rec.sentences()
    assert rec.sentences()[-2:] == ANSWER_SENTENCES


async def test_barge_in_during_sync_tool_drops_reply_but_not_the_call(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[order_call()]))
    delays = {"get_order": 1.2}
    async with conversation(chat, tone_synthesizer, config, delays=delays) as (e, rec, runner):
        await e.generate_reply(user_message="Where is order 42?")
        with anyio.fail_after(5):
            await runner.called.wait()
        for chunk in speech.stream(config.input_format, 0.1, speech.spoken(HELLO), 0.9):
            await e.feed_audio(chunk)  # the user speaks while the tool runs
        await rec.wait_for(InterruptedResponse)
        await runner.wait_answered()
        await rec.wait_for(AssistantFinishedSpeaking)  # the answer to the user's new turn
        await e.generate_reply(user_message="So?")
        await rec.wait_for(AssistantFinishedSpeaking, count=2)
    events = rec.events
    barge_in = events.index(UserStartedSpeaking())
    dropped = events.index(ToolCallInterrupted("call_a", "get_order"))
    assert barge_in < dropped < events.index(InterruptedResponse(""))  # cut before a word
    assert runner.answered == ["call_a"]  # not cancelled
    assert tool_messages(chat, len(chat.requests) - 1)["call_a"]["status"] == "done"
    assert HOLDING_LINE not in rec.sentences()


async def test_natural_conversation_ending_after_the_sentence_being_spoken(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    ending = Call(END_CONVERSATION_TOOL, ["{}"], "call_end")
    chat.script.rounds.append(Round(text=["Goodbye, ", "and thanks for calling."], calls=[ending]))
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="That is all.")
        await recorder.wait_for(AssistantEndedConversation)
    assert recorder.sentences() == ["Goodbye, and thanks for calling."]
    assert recorder.kinds()[-2:] == [AssistantFinishedSpeaking, AssistantEndedConversation]
    assert runner.calls == []  # the built-in tool never reaches the runner
    assert len(chat.requests) == 1  # the model is not asked again


async def test_natural_conversation_ending_in_interrupted_reply_does_not_end(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    ending = Call(END_CONVERSATION_TOOL, ["{}"], "call_end")
    chat.script.rounds.append(Round(text=[LONG], calls=[ending]))
    async with conversation(chat, tone_synthesizer, config, settings=PACED) as (e, rec, _):
        await e.generate_reply(user_message="That is all.")
        await rec.wait_for(AudioChunk, count=3)
        for chunk in speech.stream(config.input_format, 0.1, speech.spoken(HELLO), 0.9):
            await e.feed_audio(chunk)
        await rec.wait_for(InterruptedResponse)
        await anyio.sleep(0.5)
    assert AssistantEndedConversation not in rec.kinds()


async def test_reply_that_only_called_tools_framed_by_started_and_finished(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.extend([Round(calls=[order_call()]), Round(text=[])])
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, _):
        await engine.generate_reply(user_message="Note order 42.")
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert recorder.kinds() == [AssistantStartedSpeaking, AssistantFinishedSpeaking]


async def test_turn_timings_still_marked_for_reply_with_tool_call(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[order_call()]))
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, _):
        for chunk in speech.stream(config.input_format, 0.2, speech.spoken(HELLO), 0.9):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantFinishedSpeaking)
    marked = [e.turn for e in recorder.events if isinstance(e, AudioChunk) and e.turn]
    assert len(marked) == 1  # the reply's first audio, after the call's round
    turn = marked[0]
    assert turn.speech_ended <= turn.decided <= turn.transcribed <= turn.first_token
    assert turn.first_token <= turn.first_sentence <= turn.first_audio


async def test_tool_runner_that_raises_gives_error_output_conversation_goes_on(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.append(Round(calls=[order_call()]))
    failing = frozenset({"get_order"})
    async with conversation(chat, tone_synthesizer, config, failing=failing) as (e, rec, _):
        await e.generate_reply(user_message="Where is order 42?")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert tool_messages(chat, 1) == {"call_a": {"error": "the tool failed"}}
    assert rec.sentences() == ANSWER_SENTENCES


class SlowSynthesizer(ToneSynthesizer):
    """Takes a second per sentence: a reply's first audio comes late."""

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        await anyio.sleep(1.0)
        return await super().synthesize(text, voice=voice, speed=speed)


async def test_barge_in_before_speech_first_tool_ran_leaves_it_not_run(
    chat: ChatServer, config: SessionConfig
) -> None:
    call = Call("cancel_order", ['{"number": 7}'], "call_c")
    chat.script.rounds.append(Round(calls=[call]))
    async with conversation(chat, SlowSynthesizer(), config) as (engine, recorder, runner):
        await engine.generate_reply(user_message="Cancel order 7.")
        await anyio.sleep(0.4)  # the call is made; its short line takes 1 s to synthesize
        for chunk in speech.stream(config.input_format, 0.1, speech.spoken(HELLO), 0.9):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantFinishedSpeaking)  # the answer to the new turn
    assert runner.calls == []  # cut before its speech started: never run
    assert InterruptedResponse("") in recorder.events
    assert tool_messages(chat, 1)["call_c"] == {"error": "not run: the user interrupted the reply"}


async def test_failing_model_reply_logs_one_line_without_traceback(
    chat: ChatServer,
    tone_synthesizer: Synthesizer,
    config: SessionConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat.script.status = 503
    caplog.set_level(logging.WARNING, logger="parley")
    async with conversation(chat, tone_synthesizer, config) as (engine, recorder, _):
        await engine.generate_reply(user_message="Where is order 42?")
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert warnings(recorder) == ["response_failed"]
    lines = [record for record in caplog.records if record.name.startswith("parley")]
    assert [record.getMessage() for record in lines] == [
        "the language model (PARLEY_LLM_BASE_URL) answered HTTP 503"
    ]
    assert all(record.exc_info is None for record in lines)
