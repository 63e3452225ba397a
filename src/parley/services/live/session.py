"""One conversation on one socket: configure, then drive the engine until the socket ends.

The socket adapter (`parley.api.ws`, or a phone carrier's) hands LiveSession the wire's
codec and three callables (send a frame, close; `run` gets the receiver) and nothing else of
ASGI. The session speaks only events (codec.py): the codec decodes each frame into Inbound
events and encodes each Outbound message into frames, so a new wire is a new codec.

`run` starts three tasks: the reader (frames to events to engine calls), the engine relay
(events to messages and stored items) and the watchdog (expiry, revocation, ending from
elsewhere). The first of them to decide that the socket ends (the client left or hung up, a
close rule fired, the engine said goodbye, or a task failed) stops all three; then, always,
the engine is closed and the conversation marked `ended`, and the socket is closed with the
decided code. So no conversation stays `live` after its socket is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from parley import engine
from parley.errors import (
    AgentDisabled,
    ConversationEnded,
    ConversationExists,
    InvalidRequest,
    ParleyError,
    Unavailable,
    ValidationFailed,
)
from parley.records import Agent, Conversation, Outcome
from parley.services import agents, conversations, templates
from parley.services.context import Context
from parley.services.live import codec
from parley.services.live.codec import Codec
from parley.services.live.handshake import Handshake
from parley.services.live.relay import Relay
from parley.services.live.tools import ConversationTool, ConversationTools, resolve_tools
from parley.services.live.watchdog import watch

log = logging.getLogger(__name__)
T = TypeVar("T")

CONFIG_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 2.0
"""How long the session waits for its tasks to stop before it finishes the conversation."""
PLAYBACK_WAIT_SECONDS = 5.0
"""How long an ending conversation waits for the wire to acknowledge its last audio."""

Send = Callable[[codec.Frame], Awaitable[None]]
"""Sends one frame; never raises (a gone socket drops it)."""
Receive = Callable[[], Awaitable[codec.Frame | None]]
"""Returns the next frame (text or bytes), or None once the client has gone."""
Close = Callable[[int, str], Awaitable[None]]


class ConfigRequired(InvalidRequest):
    code = "config_required"
    message = "Send a config message first."


class AlreadyConfigured(InvalidRequest):
    code = "already_configured"
    message = "The conversation is already configured."


class ConfigTimeout(InvalidRequest):
    code = "config_timeout"
    message = "No config message within 10 seconds."


class LiveSession:
    """One conversation on one socket (see the module doc)."""

    def __init__(
        self,
        ctx: Context,
        factory: engine.EngineFactory,
        handshake: Handshake,
        wire: Codec,
        *,
        send: Send,
        close: Close,
        config_timeout: float | None = None,
        disconnect_code: Callable[[], int | None] | None = None,
    ) -> None:
        """`disconnect_code` tells the close code of a socket that went away (1001: the
        server is shutting down), so the conversation's `ended_by` says `shutdown`."""
        self._ctx = ctx
        # Read at call time, not when the module loads: the default may be tuned at run time.
        self._config_timeout = CONFIG_TIMEOUT_SECONDS if config_timeout is None else config_timeout
        self._disconnect_code = disconnect_code
        self._factory = factory
        self._handshake = handshake
        self._codec = wire
        self._send = send
        self._close = close
        self._conversation: Conversation | None = None
        self._relay: Relay | None = None
        self._tools: ConversationTools | None = None
        self._agent_project: str | None = None
        self._created: engine.ConversationEngine | None = None
        self._engine: engine.ConversationEngine | None = None
        self._configured = asyncio.Event()
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._marked = asyncio.Event()
        self._closing: tuple[int, str] | None = None
        self._ended_by = "user"

    @property
    def conversation_id(self) -> str | None:
        """The conversation, once configured."""
        return self._conversation.id if self._conversation is not None else None

    def end(self, code: int, reason: str, *, by: str | None = None) -> None:
        """Decide that the socket ends (the first decision wins) and stop the session.

        `by` is who or what ended the conversation (API.md section 5's `ended_by`); when not
        given it follows from the close code (`ended_by_for`)."""
        if self._closing is None:
            self._closing = (code, reason)
            self._ended_by = by or ended_by_for(code, reason)
        self._stopped.set()

    async def run(self, receive: Receive, *, opening: Sequence[codec.Inbound] = ()) -> None:
        """Serve the socket until it must close; always finish the conversation.

        `opening`: events the adapter already decoded before the session began (a phone
        call's `start`, read to authenticate the stream), handled before any frame.
        """
        tasks = [
            asyncio.create_task(self._read(receive, opening), name="live-reader"),
            asyncio.create_task(self._run_engine(), name="live-engine"),
            asyncio.create_task(self._watch(), name="live-watchdog"),
        ]
        for task in tasks:
            task.add_done_callback(self._task_done)
        try:
            await self._stopped.wait()
        finally:
            for task in tasks:
                task.cancel()
            # Bounded: a task that swallows its cancellation (a client library that turns
            # it into a timeout) must not keep the conversation live or the socket open.
            _, stuck = await asyncio.wait(tasks, timeout=STOP_TIMEOUT_SECONDS)
            for task in stuck:
                log.error("a live session task ignored its cancellation: %s", task.get_name())
                task.cancel()
            await asyncio.shield(self._finish())
            code, reason = self._closing or (1000, "")
            await self._emit_last(codec.Closing(code, reason))
            await self._close(code, reason)

    async def send_error(self, error: ParleyError) -> None:
        """Send an error message; the socket stays open."""
        await self._emit(codec.RequestError(error))

    async def _emit(self, message: codec.Outbound) -> None:
        for frame in self._codec.encode(message):
            await self._send(frame)

    async def _emit_last(self, message: codec.Outbound) -> None:
        """Emit on the way out: a failing codec must not keep the socket from closing."""
        try:
            await self._emit(message)
        except Exception:
            log.exception("could not encode %s", type(message).__name__)

    # --- the three tasks --------------------------------------------------------------------

    async def _read(self, receive: Receive, opening: Sequence[codec.Inbound]) -> None:
        if not await self._take(opening):
            return
        loop = asyncio.get_running_loop()
        configure_by = loop.time() + self._config_timeout
        while True:
            timeout = None if self._engine is not None else configure_by - loop.time()
            try:
                data = await asyncio.wait_for(receive(), timeout)
            except TimeoutError:
                await self.send_error(ConfigTimeout())
                self.end(1008, "config timeout")
                return
            if data is None:
                gone = self._disconnect_code() if self._disconnect_code else None
                self.end(1000, "", by="shutdown" if gone == GOING_AWAY else "user")
                return
            if len(data) > codec.MAX_FRAME_BYTES:
                self.end(1009, "message too big")
                return
            try:
                events = self._codec.decode(data)
            except ParleyError as error:
                await self.send_error(error)
                continue
            if not await self._take(events):
                return

    async def _take(self, events: Sequence[codec.Inbound]) -> bool:
        """Handle events in order (a refused one is answered); False once reading stops."""
        for event in events:
            try:
                await self._handle(event)
            except engine.EngineClosed:
                self.end(1000, "")
            except Unavailable as error:
                await self.send_error(error)  # names the cause, e.g. a database disk full
                if not self._configured.is_set():
                    # A dependency that failed `config` will not be back within the config
                    # time-out: close now (1013, try again later) rather than after it.
                    self.end(TRY_AGAIN_LATER, "service unavailable")
            except ParleyError as error:
                await self.send_error(error)
            if self._stopped.is_set():
                return False
        return True

    async def _run_engine(self) -> None:
        """Enter the engine once configured, relay its events until it closes."""
        await self._configured.wait()
        created, relay = self._created, self._relay
        if created is None or relay is None:
            return
        async with created as running:
            self._engine = running
            self._started.set()
            async for event in running.events():
                await relay.relay(event)
                if isinstance(event, engine.AssistantEndedConversation):
                    await self._await_playback()
                    self.end(1000, "conversation ended", by="assistant")
                    return

    async def _await_playback(self) -> None:
        """Wait (bounded) until the wire acknowledges the audio sent, so a caller hears the
        goodbye in full; at once on a wire without acknowledgements."""
        loop = asyncio.get_running_loop()
        until = loop.time() + PLAYBACK_WAIT_SECONDS
        while True:
            self._marked.clear()  # before the check: a Mark handled after it sets it again
            if not self._codec.playback_pending:
                return
            try:
                await asyncio.wait_for(self._marked.wait(), until - loop.time())
            except TimeoutError:
                log.info("the wire did not acknowledge the last audio in time")
                return

    async def _watch(self) -> None:
        code, reason = await watch(self._ctx, self._handshake, lambda: self.conversation_id)
        self.end(code, reason)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("a live session task failed", exc_info=error)
            self.end(1011, "internal error")

    async def _finish(self) -> None:
        """Mark the conversation ended (the engine was closed when its task stopped)."""
        if self._conversation is not None:
            try:
                analysis = self._relay.analysis if self._relay is not None else None
                await conversations.finish_live(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation.id,
                    outcome=Outcome(
                        ended_by=self._ended_by,
                        latencies_ms=tuple(analysis.latencies_ms) if analysis else (),
                        interruptions_count=analysis.interruptions_count if analysis else 0,
                    ),
                )
            except ParleyError:
                log.exception("could not mark conversation %s ended", self._conversation.id)

    # --- inbound events ---------------------------------------------------------------------

    async def _handle(self, event: codec.Inbound) -> None:
        match event:
            case codec.Configure():
                await self._configure(event)
                return
            case codec.Hangup():
                self.end(1000, "")
                return
            case codec.Mark():
                self._marked.set()
                return
        live = self._engine
        if live is None:
            raise ConfigRequired()
        match event:
            case codec.AudioIn(audio=audio):
                await live.feed_audio(audio)
            case codec.Say(text=text):
                await live.say(text)
            case codec.GenerateReply(user_message=user, system_message=system):
                await live.generate_reply(user_message=user, system_message=system)
                if user is not None and self._relay is not None:
                    await self._relay.store("user", user.strip())  # the user's typed words
            case codec.Dtmf(digits=digits):
                entry = f"DTMF: {digits}"
                await live.generate_reply(user_message=entry)
                if self._relay is not None:
                    await self._relay.store("user", entry)
            case codec.UpdateSystemPrompt(system_prompt=prompt):
                await live.update_system_prompt(prompt)
            case codec.Interrupt():
                await live.interrupt()
            case codec.Mute():
                await live.mute()
            case codec.Unmute():
                await live.unmute()
            case codec.ToolCallOutput(tool_call_id=call_id, output=output):
                if self._tools is not None:
                    await self._tools.accept_output(call_id, output)
            case codec.UpdateToolsSubset(tools=items):
                await self._update_tools(live, items)
            case codec.SetExternalId(external_id=external_id):
                await conversations.set_external_id(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation.id if self._conversation else "",
                    external_id=external_id,
                )

    async def _configure(self, event: codec.Configure) -> None:
        if self._created is not None:
            raise AlreadyConfigured()
        principal = self._handshake.principal
        token = principal.token
        for requested in (event.input_format, event.output_format):
            if requested is not None:
                engine.AudioFormat.parse(requested)  # refuse before the conversation goes live
        # Everything the config could get wrong is checked before the conversation goes live,
        # so a refused config leaves nothing behind and may be sent again.
        ref, project = await self._agent_of(event)
        checked = await agents.get_agent(
            self._ctx, org_id=principal.org_id, ref=ref, project=project
        )
        setup = await _Setup.check(self._ctx, event, checked)
        try:
            conversation, agent = await conversations.start_live(
                self._ctx,
                org_id=principal.org_id,
                conversation_id=self._handshake.conversation_id,
                create_if_missing=self._handshake.create_if_missing,
                agent=ref,
                project=project,
                end_user=token.sub if token is not None else None,
            )
            if agent.updated_at != checked.updated_at:  # changed meanwhile: check it again
                setup = await _Setup.check(self._ctx, event, agent)
        except (AgentDisabled, ConversationEnded, ConversationExists) as error:
            await self.send_error(error)
            self.end(1008, error.code)
            return
        self._conversation = conversation
        self._agent_project = agent.project.id
        if setup.template_values:
            await conversations.set_template_variables(
                self._ctx,
                org_id=principal.org_id,
                conversation_id=conversation.id,
                values=setup.template_values,
            )
        tools = self._tools = ConversationTools(
            self._ctx,
            org_id=principal.org_id,
            conversation_id=conversation.id,
            emit=self._emit,
            has_client=self._codec.client_tools,
        )
        tools.use(setup.tools, ends_conversation=setup.ends_conversation)
        self._relay = Relay(
            self._ctx,
            org_id=principal.org_id,
            conversation_id=conversation.id,
            emit=self._emit,
            tools=tools,
            heard=self._codec.heard if isinstance(self._codec, codec.KnowsPlayback) else None,
        )
        config = engine.SessionConfig(
            agent_name=agent.name,
            system_prompt=setup.system_prompt,
            welcome_message=setup.welcome_message,
            voice_id=event.voice_id or agent.voice_id,
            input_format=engine.AudioFormat.parse(event.input_format or agent.audio_format),
            output_format=engine.AudioFormat.parse(event.output_format or agent.audio_format),
            language=agent.language,
            tools=tools.definitions(),
            keywords=agent.boosted_keywords,
        )
        self._created = self._factory.create(config, tool_runner=tools)
        await self._emit(codec.ConversationCreated(conversation.id))
        self._configured.set()
        await self._started.wait()  # the engine task enters the engine
        await self._emit(codec.ReadyToStart())

    async def _agent_of(self, event: codec.Configure) -> tuple[str, str | None]:
        """The agent a config names, or (`agent` None) that of the pending conversation the
        handshake names: a phone call is configured from its stored conversation."""
        if event.agent is not None:
            return event.agent, event.project
        conversation_id = self._handshake.conversation_id
        if conversation_id is None:
            raise ValidationFailed(param_errors={"agent": "is required"})
        found = await conversations.get_conversation(
            self._ctx, org_id=self._handshake.principal.org_id, conversation_id=conversation_id
        )
        if found.agent is None:
            raise ValidationFailed(param_errors={"agent": "the conversation has no agent"})
        return found.agent.id, None

    async def _update_tools(
        self, live: engine.ConversationEngine, items: Sequence[codec.ToolItem]
    ) -> None:
        tools, agent = self._tools, self._agent_project
        if tools is None or agent is None:
            raise ConfigRequired()
        found, ends = await resolve_tools(
            self._ctx, org_id=self._handshake.principal.org_id, project_id=agent, items=items
        )
        tools.use(found, ends_conversation=ends)
        await live.update_tools(tools.definitions())


@dataclass(frozen=True, slots=True)
class _Setup:
    """What a `config` decides beyond the agent: prompts with their variables, and tools."""

    system_prompt: str
    welcome_message: str | None
    template_values: dict[str, str]
    tools: list[ConversationTool]
    ends_conversation: bool

    @classmethod
    async def check(cls, ctx: Context, frame: codec.Configure, agent: Agent) -> _Setup:
        """Resolve the config against the agent; raise the request error it deserves."""
        values = dict(frame.template_variables or {})
        defaults = {name: spec.default_value for name, spec in agent.template_variables.items()}
        prompt = _given(frame.system_prompt, agent.system_prompt)
        welcome = _given(frame.welcome_message, agent.welcome_message)
        used = templates.placeholders(prompt) | templates.placeholders(welcome or "")
        rendered_prompt = templates.render(prompt, values=values, defaults=defaults)
        rendered_welcome = (
            templates.render(welcome, values=values, defaults=defaults) if welcome else welcome
        )
        items = frame.tools if frame.tools is not None else tuple(agent.tools)
        found, ends = await resolve_tools(
            ctx, org_id=agent.org_id, project_id=agent.project.id, items=items
        )
        return cls(
            system_prompt=rendered_prompt,
            welcome_message=rendered_welcome,
            template_values={name: values.get(name, defaults.get(name, "")) for name in used},
            tools=found,
            ends_conversation=ends,
        )


GOING_AWAY = 1001
"""The close code of a socket the server closes as it shuts down (api/uvicorn_ws.py)."""
TRY_AGAIN_LATER = 1013
"""RFC 6455 section 7.4.2 (IANA registry): a dependency is unavailable; retry later."""

_ENDED_BY_REASON = {
    "token expired": "timeout",
    "config timeout": "timeout",
    "session token revoked": "api",
    "conversation ended": "api",
}


def ended_by_for(code: int, reason: str) -> str:
    """Who ended a conversation whose socket closes with (code, reason), when the closer did
    not say: the watchdog's reasons map to `timeout` or `api`; 1000 is the user leaving;
    1001 the server going away; anything else (1008 refusals, 1009, 1011) an error."""
    if reason in _ENDED_BY_REASON:
        return _ENDED_BY_REASON[reason]
    if code == 1000:
        return "user"
    return "shutdown" if code == GOING_AWAY else "error"


def _given(value: T | None, default: T) -> T:
    return value if value is not None else default
