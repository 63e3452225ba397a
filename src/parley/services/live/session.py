"""One conversation on one socket: configure, then drive the engine until the socket ends.

The socket adapter (`parley.api.ws`) hands LiveSession.run three callables (receive a
frame, send a message, close) and nothing else of ASGI. `run` starts three tasks: the
reader (client frames to engine calls), the engine relay (events to messages and stored
items) and the watchdog (expiry, revocation, ending from elsewhere). The first of them to
decide that the socket ends (the client left, a close rule fired, the engine said goodbye,
or a task failed) stops all three; then, always, the engine is closed and the conversation
marked `ended`, and the socket is closed with the decided code. So no conversation stays
`live` after its socket is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from parley import engine
from parley.errors import (
    AgentDisabled,
    ConversationEnded,
    ConversationExists,
    InvalidRequest,
    ParleyError,
    ValidationFailed,
)
from parley.records import Agent, Conversation
from parley.services import agents, conversations, templates
from parley.services.context import Context
from parley.services.live import frames
from parley.services.live.handshake import Handshake
from parley.services.live.relay import Relay
from parley.services.live.tools import (
    ConversationTool,
    ConversationTools,
    inline_tool,
    resolve_tools,
)
from parley.services.live.watchdog import watch

log = logging.getLogger(__name__)
T = TypeVar("T")

CONFIG_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 2.0
"""How long the session waits for its tasks to stop before it finishes the conversation."""

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[str | bytes | None]]
"""Returns the next client frame (text or bytes), or None once the client has gone."""
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
        *,
        send: Send,
        close: Close,
    ) -> None:
        self._ctx = ctx
        self._factory = factory
        self._handshake = handshake
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
        self._closing: tuple[int, str] | None = None

    @property
    def conversation_id(self) -> str | None:
        """The conversation, once configured."""
        return self._conversation.id if self._conversation is not None else None

    def end(self, code: int, reason: str) -> None:
        """Decide that the socket ends (the first decision wins) and stop the session."""
        if self._closing is None:
            self._closing = (code, reason)
        self._stopped.set()

    async def run(self, receive: Receive) -> None:
        """Serve the socket until it must close; always finish the conversation."""
        tasks = [
            asyncio.create_task(self._read(receive), name="live-reader"),
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
            await self._close(code, reason)

    async def send_error(self, error: ParleyError) -> None:
        """Send an `error` message; the socket stays open."""
        await self._send(frames.error_message(error))

    # --- the three tasks --------------------------------------------------------------------

    async def _read(self, receive: Receive) -> None:
        loop = asyncio.get_running_loop()
        configure_by = loop.time() + CONFIG_TIMEOUT_SECONDS
        while True:
            timeout = None if self._engine is not None else configure_by - loop.time()
            try:
                data = await asyncio.wait_for(receive(), timeout)
            except TimeoutError:
                await self.send_error(ConfigTimeout())
                self.end(1008, "config timeout")
                return
            if data is None:
                self.end(1000, "")
                return
            if len(data) > frames.MAX_MESSAGE_BYTES:
                self.end(1009, "message too big")
                return
            if isinstance(data, bytes):
                await self.send_error(
                    ValidationFailed(param_errors={"message": "send JSON text frames"})
                )
                continue
            try:
                await self._handle(frames.parse_frame(data))
            except engine.EngineClosed:
                self.end(1000, "")
                return
            except ParleyError as error:
                await self.send_error(error)

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
                    self.end(1000, "conversation ended")
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
                await conversations.finish_live(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation.id,
                )
            except ParleyError:
                log.exception("could not mark conversation %s ended", self._conversation.id)

    # --- client frames ----------------------------------------------------------------------

    async def _handle(self, frame: frames.ClientFrame) -> None:
        if isinstance(frame, frames.Configure):
            await self._configure(frame)
            return
        live = self._engine
        if live is None:
            raise ConfigRequired()
        match frame:
            case frames.FeedAudio():
                await live.feed_audio(frame.pcm())
            case frames.Say(text=text):
                await live.say(text)
            case frames.GenerateReply(user_message=user, system_message=system):
                await live.generate_reply(user_message=user, system_message=system)
                if user is not None and self._relay is not None:
                    await self._relay.store("user", user.strip())  # the user's typed words
            case frames.UpdateSystemPrompt(system_prompt=prompt):
                await live.update_system_prompt(prompt)
            case frames.Mute(type="mute"):
                await live.mute()
            case frames.Mute():
                await live.unmute()
            case frames.ToolCallOutput(tool_call_id=call_id, output=output):
                if self._tools is not None:
                    await self._tools.accept_output(call_id, output)
            case frames.UpdateToolsSubset(tools=items):
                await self._update_tools(live, items)
            case frames.SetExternalId(external_id=external_id):
                await conversations.set_external_id(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation.id if self._conversation else "",
                    external_id=external_id,
                )

    async def _configure(self, frame: frames.Configure) -> None:
        if self._created is not None:
            raise AlreadyConfigured()
        principal = self._handshake.principal
        token = principal.token
        for requested in (frame.input_format, frame.output_format):
            if requested is not None:
                engine.AudioFormat.parse(requested)  # refuse before the conversation goes live
        # Everything the config could get wrong is checked before the conversation goes live,
        # so a refused config leaves nothing behind and may be sent again.
        agent = await agents.get_agent(
            self._ctx, org_id=principal.org_id, ref=frame.agent, project=frame.project
        )
        setup = await _Setup.check(self._ctx, frame, agent)
        try:
            conversation, agent = await conversations.start_live(
                self._ctx,
                org_id=principal.org_id,
                conversation_id=self._handshake.conversation_id,
                create_if_missing=self._handshake.create_if_missing,
                agent=frame.agent,
                project=frame.project,
                end_user=token.sub if token is not None else None,
            )
            setup = await _Setup.check(self._ctx, frame, agent)  # as the agent is now
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
            self._ctx, org_id=principal.org_id, conversation_id=conversation.id, send=self._send
        )
        tools.use(setup.tools, ends_conversation=setup.ends_conversation)
        self._relay = Relay(
            self._ctx,
            org_id=principal.org_id,
            conversation_id=conversation.id,
            send=self._send,
            tools=tools,
        )
        config = engine.SessionConfig(
            agent_name=agent.name,
            system_prompt=setup.system_prompt,
            welcome_message=setup.welcome_message,
            voice_id=frame.voice_id or agent.voice_id,
            input_format=engine.AudioFormat.parse(frame.input_format or agent.audio_format),
            output_format=engine.AudioFormat.parse(frame.output_format or agent.audio_format),
            language=agent.language,
            tools=tools.definitions(),
        )
        self._created = self._factory.create(config, tool_runner=tools)
        await self._send({"type": "conversation_created", "conversation_id": conversation.id})
        self._configured.set()
        await self._started.wait()  # the engine task enters the engine
        await self._send({"type": "ready_to_start_conversation"})

    async def _update_tools(
        self, live: engine.ConversationEngine, items: list[str | frames.InlineToolFrame]
    ) -> None:
        tools, agent = self._tools, self._agent_project
        if tools is None or agent is None:
            raise ConfigRequired()
        found, ends = await resolve_tools(
            self._ctx,
            org_id=self._handshake.principal.org_id,
            project_id=agent,
            items=[item if isinstance(item, str) else inline_tool(item) for item in items],
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
    async def check(cls, ctx: Context, frame: frames.Configure, agent: Agent) -> _Setup:
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
        items = frame.tools if frame.tools is not None else list(agent.tools)
        found, ends = await resolve_tools(
            ctx,
            org_id=agent.org_id,
            project_id=agent.project.id,
            items=[item if isinstance(item, str) else inline_tool(item) for item in items],
        )
        return cls(
            system_prompt=rendered_prompt,
            welcome_message=rendered_welcome,
            template_values={name: values.get(name, defaults.get(name, "")) for name in used},
            tools=found,
            ends_conversation=ends,
        )


def _given(value: T | None, default: T) -> T:
    return value if value is not None else default
