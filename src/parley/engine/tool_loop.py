"""One reply with tools: model rounds, tool calls, and what is said meanwhile (API.md 12).

A reply runs two tasks: the producer below (the model's rounds and the calls) and the
speaker, joined by an unbounded queue of reply parts, so the speaker says the model's words
while a tool runs. Per round the model streams words (queued to the speaker at once), then
calls. The history gets the assistant turn with its calls and, right after it, one `tool`
turn per call (the model's history must pair each call with an output, even while it runs):

- a refused call (unknown tool, arguments that are not a JSON object or break the schema)
  gets `{"error": ...}` and a `tool_call_invalid` warning;
- `natural_conversation_ending` is not run: the words queued are spoken to their end, then
  AssistantEndedConversation (the speaker never gets there when the reply is interrupted);
- `keypad_input` is not run either: its output is KEYPAD_DONE at once, and a PressKeys
  after the round's words makes the speaker send KeypadPressed (the tones) in order with
  the speech; the model is asked again, as after any call;
- `choose_not_to_respond` (output KEYPAD_DONE) ends the reply: the model is not asked
  again and the speaker, after the words already queued (a model that chooses silence
  says none), sends AssistantChoseNotToRespond;
- a sync call whose runner answers a HandOff (a transfer) ends the reply too: the model
  hears the HandOff's output and is not asked again; after the words the speaker sends
  AssistantHandedOff (never after an interruption);
- a `sync` call holds `{"status": "running"}` until its output replaces it; the model is
  asked again once every sync call of the round has answered. A sync call silent for
  HOLDING_LINE_AFTER_S gets a holding line as soon as nothing is being spoken;
- an `async` call holds ASYNC_STARTED; its output replaces it when it arrives, with no new
  reply.

With `require_speech_before_tool_call`, the tool waits until the reply's first audio is
out (when the model said nothing, a short line is said first). Calls run in the engine's
background task group, not in the reply: a barge-in drops the reply (ToolCallInterrupted
for each sync call it waited for) but not the calls, whose outputs still reach the history.
After MAX_TOOL_ROUNDS rounds with calls, the model is asked once more without tools
(`tool_rounds_exceeded`), so the turn ends in words. A failing model or generator gets a
`response_failed` warning and the apology, after what was already said.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from parley.clock import Clock
from parley.engine.base import (
    EndConversation,
    EngineEvent,
    EngineWarning,
    HandOver,
    PressKeys,
    ReplyGenerator,
    ReplyPart,
    ReplyRequest,
    StaySilent,
    ToolCallInterrupted,
    ToolCallPart,
    Turn,
)
from parley.engine.errors import ReplyModelFailed
from parley.engine.speaker import Break, Response, Speaker
from parley.engine.tool_checks import ToolCallRefused, check_call
from parley.engine.tools import (
    ASYNC_STARTED,
    END_CONVERSATION_TOOL,
    HOLDING_LINE_AFTER_S,
    KEYPAD_DONE,
    KEYPAD_TOOL,
    MAX_TOOL_ROUNDS,
    SILENCE_TOOL,
    HandOff,
    ToolDefinition,
    ToolInvocation,
    ToolRunner,
)

logger = logging.getLogger(__name__)

HOLDING_LINE = "One moment, please."
SPEECH_BEFORE_TOOL = "Let me check that."
SYNC_RUNNING: dict[str, Any] = {"status": "running"}
ENDING: dict[str, Any] = {"status": "ending"}
NOT_RUN: dict[str, Any] = {"error": "not run: the user interrupted the reply"}
SPEECH_WAIT_LIMIT_S = 5.0
_QUIET_POLL_S = 0.05

Part = ReplyPart | Break
Emit = Callable[[EngineEvent], Awaitable[None]]


@dataclass
class _Running:
    call: ToolInvocation
    done: anyio.Event
    handed_off: bool = False


class ToolLoop:
    """Runs the replies of one conversation (see the module doc)."""

    def __init__(
        self,
        *,
        replies: ReplyGenerator,
        runner: ToolRunner,
        speaker: Speaker,
        history: deque[Turn],
        emit: Emit,
        clock: Clock,
        apology: str,
    ) -> None:
        self._replies = replies
        self._runner = runner
        self._speaker = speaker
        self._history = history
        self._emit = emit
        self._clock = clock
        self._apology = apology

    async def reply(self, request: ReplyRequest, response: Response, calls: TaskGroup) -> None:
        """Speak one reply to `request`, running its tool calls in `calls` (see the module doc)."""
        send, receive = anyio.create_memory_object_stream[Part](math.inf)
        async with anyio.create_task_group() as group:
            group.start_soon(self._produce, request, response, send, calls)
            await self._speaker.speak(_parts(receive), response)

    async def _produce(
        self,
        request: ReplyRequest,
        response: Response,
        send: MemoryObjectSendStream[Part],
        calls: TaskGroup,
    ) -> None:
        async with send:
            try:
                await self._rounds(request, response, send, calls)
            except Exception as error:
                # A model that is down or refuses is an outage, not a bug: the replier has
                # logged the one line saying why (openai_chat.py), so no traceback per turn.
                if not isinstance(error, ReplyModelFailed):
                    logger.exception("a response failed")
                await self._warn("response_failed", "The assistant's response failed.")
                send.send_nowait(Break())
                send.send_nowait(self._apology)

    async def _rounds(
        self,
        request: ReplyRequest,
        response: Response,
        send: MemoryObjectSendStream[Part],
        calls: TaskGroup,
    ) -> None:
        for number in range(MAX_TOOL_ROUNDS + 1):
            offered = request.tools if number < MAX_TOOL_ROUNDS else ()
            if request.tools and not offered:
                await self._warn(
                    "tool_rounds_exceeded",
                    f"The model called tools in {MAX_TOOL_ROUNDS} rounds; it answers without.",
                )
            ask = dataclasses.replace(request, history=tuple(self._history), tools=offered)
            text, made = await self._stream(ask, send, response)
            if not made:
                return
            if not offered:
                logger.warning("the model called tools it was not offered; ignored")
                return
            last = await self._call(made, text, offered, response, send, calls)
            if last is not None:  # an ending, a silence or a hand-over: no more rounds
                send.send_nowait(last)
                return

    async def _stream(
        self, request: ReplyRequest, send: MemoryObjectSendStream[Part], response: Response
    ) -> tuple[str, list[ToolCallPart]]:
        """Queue the model's words to the speaker; return them and the calls it made."""
        words: list[str] = []
        made: list[ToolCallPart] = []
        async with aclosing(self._replies.reply(request)) as parts:
            async for part in parts:
                if response.turn is not None:
                    response.turn.token(self._clock.monotonic())
                if isinstance(part, ToolCallPart):
                    made.append(part)
                    continue
                if isinstance(part, str):
                    words.append(part)
                send.send_nowait(part)
        return "".join(words).strip(), made

    async def _call(
        self,
        made: list[ToolCallPart],
        text: str,
        offered: Sequence[ToolDefinition],
        response: Response,
        send: MemoryObjectSendStream[Part],
        calls: TaskGroup,
    ) -> EndConversation | StaySilent | HandOver | None:
        """Record and start one round's calls, wait for the sync ones; return the part that
        ends the reply (an ending, a silence or a hand-over), None to ask the model again."""
        tools = {tool.name: tool for tool in offered}
        # The call's turn and all its outputs join the history with no await between them:
        # a barge-in must not leave a call without its `tool` turn.
        self._history.append(Turn("assistant", text, tool_calls=tuple(made)))
        last: EndConversation | StaySilent | HandOver | None = None
        keys: list[PressKeys] = []
        runs: list[tuple[ToolDefinition, ToolInvocation]] = []
        refusals: list[str] = []
        for part in made:
            try:
                call = check_call(part, tools)
            except ToolCallRefused as refused:
                refusals.append(f"The model's call of {part.name!r}: {refused.reason}.")
                self._history.append(_output_turn(part.id, {"error": refused.reason}))
                continue
            definition = tools[call.name]
            if call.name == END_CONVERSATION_TOOL:
                last = EndConversation()
                self._history.append(_output_turn(call.id, ENDING))
                continue
            if call.name in (KEYPAD_TOOL, SILENCE_TOOL):
                if call.name == KEYPAD_TOOL:
                    keys.append(PressKeys(str(call.arguments["digits"])))
                elif last is None:
                    last = StaySilent()
                self._history.append(_output_turn(call.id, KEYPAD_DONE))
                continue
            sync = definition.execution_mode == "sync"
            self._history.append(_output_turn(call.id, SYNC_RUNNING if sync else ASYNC_STARTED))
            runs.append((definition, call))
        for message in refusals:
            await self._warn("tool_call_invalid", message)
        speech_first = any(tool.require_speech_before_tool_call for tool, _ in runs)
        if speech_first and not text and not response.on_air.is_set() and not response.sent:
            send.send_nowait(SPEECH_BEFORE_TOOL)
        for part in made:  # the words before the calls are complete: the speaker says them
            response.calls_queued += 1
            send.send_nowait(part)
        for press in keys:  # after the words said before them
            send.send_nowait(press)
        if speech_first:
            try:
                with anyio.move_on_after(SPEECH_WAIT_LIMIT_S):  # a silent voice holds none back
                    await response.on_air.wait()
            except anyio.get_cancelled_exc_class():
                for _, call in runs:  # cut before they ran: they never will
                    self._set_output(call.id, NOT_RUN)
                raise
        waiting: list[_Running] = []
        for tool, call in runs:
            running = _Running(call, anyio.Event())
            calls.start_soon(self._run, running)
            if tool.execution_mode == "sync":
                waiting.append(running)
        await self._wait(waiting, response, send)
        if last is None and any(running.handed_off for running in waiting):
            last = HandOver()
        return last

    async def _wait(
        self, waiting: list[_Running], response: Response, send: MemoryObjectSendStream[Part]
    ) -> None:
        """Wait for the sync calls; on barge-in, tell which calls the dropped reply awaited."""
        if not waiting:
            return
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._hold, waiting, response, send)
                for running in waiting:
                    await running.done.wait()
                group.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            if response.scope.cancel_called:
                with anyio.CancelScope(shield=True):
                    for running in waiting:
                        if not running.done.is_set():
                            await self._emit(
                                ToolCallInterrupted(running.call.id, running.call.name)
                            )
            raise

    async def _hold(
        self, waiting: list[_Running], response: Response, send: MemoryObjectSendStream[Part]
    ) -> None:
        """Say the holding line once nothing is being spoken, HOLDING_LINE_AFTER_S on."""
        await anyio.sleep(HOLDING_LINE_AFTER_S)
        # Polled: the speaker's playback end moves as it sends; the waiting caller cancels us.
        while response.speaking(self._clock.monotonic()) or send.statistics().current_buffer_used:
            until = response.playing_until or 0.0
            await anyio.sleep(max(until - self._clock.monotonic(), _QUIET_POLL_S))
        if all(running.done.is_set() for running in waiting):
            return  # answered just now: the caller is about to cancel us
        send.send_nowait(HOLDING_LINE)
        send.send_nowait(Break())

    async def _run(self, running: _Running) -> None:
        """Run one call to its end (a barge-in does not stop it) and record its output."""
        call = running.call
        try:
            output = await self._runner.run(call)
        except Exception:
            logger.exception("the tool runner failed on %r", call.name)
            output = {"error": "the tool failed"}
        if isinstance(output, HandOff):
            running.handed_off = True
            output = output.output
        self._set_output(call.id, output)
        running.done.set()

    def _set_output(self, call_id: str, output: Any) -> None:
        for index, turn in enumerate(self._history):
            if turn.role == "tool" and turn.tool_call_id == call_id:
                self._history[index] = _output_turn(call_id, output)
                return
        logger.info("a tool output arrived after its call left the history")

    async def _warn(self, code: str, message: str) -> None:
        await self._emit(EngineWarning(code, message))


def _output_turn(call_id: str, output: Any) -> Turn:
    return Turn("tool", json.dumps(output, default=str), tool_call_id=call_id)


async def _parts(receive: MemoryObjectReceiveStream[Part]) -> AsyncGenerator[Part, None]:
    async with receive:
        async for part in receive:
            yield part
