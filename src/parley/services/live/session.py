"""One conversation on one socket: configure, then drive the engine until the socket ends.

The socket adapter (`parley.api.ws`, or a phone carrier's) hands LiveSession the wire's
codec and three callables (send a frame, close; `run` gets the receiver) and nothing else of
ASGI. The session speaks only events (codec.py): the codec decodes each frame into Inbound
events and encodes each Outbound message into frames, so a new wire is a new codec.

`run` starts five tasks: the reader (frames to events to engine calls), the engine relay
(events to messages and stored items), the watchdog (expiry, revocation, ending from
elsewhere), the silence timer (silence.py: the poke, the silence limit) and, on a call
placed to someone, the callee watch (callee.py: the welcome for a person, the voicemail
message for a machine). The first of them to decide that the socket ends (the client left
or hung up, a close rule fired, the engine said goodbye, the user stayed silent, a machine
took the call, or a task failed) stops them all; then, always,
the engine is closed and the conversation marked `ended`, and the socket is closed with the
decided code. So no conversation stays `live` after its socket is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio.to_thread

from parley import engine, metrics
from parley.errors import (
    AgentDisabled,
    AgentNotAllowed,
    ConversationEnded,
    ConversationExists,
    InvalidRequest,
    ParleyError,
    TooManyActiveConversations,
    Unavailable,
)
from parley.records import Agent, Conversation, Outcome
from parley.services import conversations, endings, post_call
from parley.services.answering import Verdict
from parley.services.context import Context
from parley.services.endings import CloseCode, Ending
from parley.services.languages import session_languages
from parley.services.live import codec, handoffs, handover, starting
from parley.services.live.callee import Callee, act_on, wait_for_verdict
from parley.services.live.codec import Codec
from parley.services.live.handshake import Handshake
from parley.services.live.recorder import Recorder
from parley.services.live.relay import Relay
from parley.services.live.reset import Settings, reset, settings_of
from parley.services.live.silence import SilenceTimer
from parley.services.live.tools import ConversationTools, resolve_tools
from parley.services.live.watchdog import watch
from parley.services.voices import catalog_of

log = logging.getLogger(__name__)
T = TypeVar("T")

CALL_LEFT = (endings.USER_HANGUP, endings.CLIENT_CLOSED)
"""How a call's stream ends when the carrier stops it for a transfer (`stop`, or closed)."""

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
        server is shutting down), so the conversation ends by `endings.SHUTDOWN`."""
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
        self._closing: Ending | None = None
        self._silence: SilenceTimer | None = None
        self._callee: Callee | None = None
        self._goodbye: Ending = endings.ASSISTANT
        """How the conversation ends once the engine has said its last words."""
        self._handed_over = False
        """The call was put through to a number: its stream's end does not end it."""
        self._voice_id = ""
        self._given_values: dict[str, str] = {}
        """The template values the `config` gave (a transfer renders the next agent's)."""
        self._recorder: Recorder | None = None
        self._storage_policy_id: str | None = None
        """The external storage policy the recording goes to (None: the directory)."""
        self._settings: Settings | None = None
        """What the conversation runs with: its config's, then its last reset's."""

    @property
    def conversation_id(self) -> str | None:
        """The conversation, once configured."""
        return self._conversation.id if self._conversation is not None else None

    def end(self, ending: Ending) -> None:
        """Decide how the socket ends (the first decision wins) and stop the session: its
        close code and reason, and the conversation's `ended_by` unless another ender came
        first (services/endings.py)."""
        if self._closing is None:
            self._closing = ending
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
            asyncio.create_task(self._watch_silence(), name="live-silence"),
            asyncio.create_task(self._watch_callee(), name="live-callee"),
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
            ending = self._closing or endings.CLIENT_CLOSED
            await self._emit_last(codec.Closing(ending.close_code, ending.reason))
            await self._close(ending.close_code, ending.reason)

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
                self.end(endings.CONFIG_TIMEOUT)
                return
            if data is None:
                gone = self._disconnect_code() if self._disconnect_code else None
                self.end(
                    endings.SHUTDOWN if gone == CloseCode.GOING_AWAY else endings.CLIENT_CLOSED
                )
                return
            if len(data) > codec.MAX_FRAME_BYTES:
                self.end(endings.MESSAGE_TOO_BIG)
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
                self.end(endings.USER_HANGUP)
            except Unavailable as error:
                await self.send_error(error)  # names the cause, e.g. a database disk full
                if not self._configured.is_set():
                    # A dependency that failed `config` will not be back within the config
                    # time-out: close now (1013, try again later) rather than after it.
                    self.end(endings.SERVICE_UNAVAILABLE)
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
                if self._recorder is not None:
                    self._recorder.observe(event)
                await relay.relay(event)
                if self._silence is not None:
                    self._silence.observe(event)
                if isinstance(event, engine.AssistantEndedConversation):
                    await self._await_playback()
                    self.end(self._goodbye)
                    return
                if isinstance(event, engine.AssistantHandedOff):
                    await self._hand_off(running)

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
        self.end(await watch(self._ctx, self._handshake, lambda: self.conversation_id))

    async def _watch_silence(self) -> None:
        """Poke a silent user and end the conversation at the silence limit (silence.py)."""
        await self._started.wait()
        silence, live = self._silence, self._engine
        if silence is None or live is None:
            return

        async def poke(text: str) -> bool:
            try:
                await live.say(text)
            except engine.TooManyPendingResponses:  # the agent has plenty to say already
                log.info("the silence poke was not queued: responses are waiting")
                return False
            return True

        silence.start()
        try:
            await silence.run(poke)
        except engine.EngineClosed:
            return  # the reader ends the session
        self.end(endings.SILENCE_LIMIT)

    async def _hand_off(self, live: engine.ConversationEngine) -> None:
        """Carry out the transfer the model asked for, its words said (handoffs.py)."""
        request = self._tools.take_hand_off() if self._tools is not None else None
        if isinstance(request, handoffs.AgentTransfer):
            await self._switch_agent(live, request.agent)
        elif isinstance(request, handoffs.PhoneTransfer):
            await self._put_through(live, request)

    async def _put_through(
        self, live: engine.ConversationEngine, request: handoffs.PhoneTransfer
    ) -> None:
        """Once the caller has heard the agent's last word, the call is put through
        (handover.py); the stream then stops and the conversation waits, live."""
        if self._conversation is None:
            return
        await self._await_playback()
        self._handed_over = await handover.put_through(
            self._ctx,
            live,
            org_id=self._handshake.principal.org_id,
            conversation_id=self._conversation.id,
            request=request,
            voice_id=self._voice_id,
        )

    async def _switch_agent(self, live: engine.ConversationEngine, agent: Agent) -> None:
        """Go on with `agent` (handover.py)."""
        if self._conversation is None or self._tools is None:
            return
        switched = await handover.switch_agent(
            self._ctx,
            live,
            self._tools,
            org_id=self._handshake.principal.org_id,
            conversation_id=self._conversation.id,
            agent=agent,
            given_values=self._given_values,
        )
        if switched is not None:
            self._agent_project, self._voice_id = switched.project_id, switched.voice_id
            if self._settings is not None:
                self._settings = dataclasses.replace(
                    self._settings, agent_id=agent.id, voice_id=switched.voice_id
                )

    async def _watch_callee(self) -> None:
        """On a call placed to someone: the welcome for a person; for a machine the voicemail
        message once, then the call ends `voicemail` (callee.py)."""
        await self._started.wait()
        callee, live, conversation = self._callee, self._engine, self._conversation
        if callee is None or live is None or conversation is None:
            return
        verdict = await wait_for_verdict(
            self._ctx, org_id=self._handshake.principal.org_id, conversation_id=conversation.id
        )
        if verdict is not Verdict.PERSON:
            self._goodbye = endings.VOICEMAIL  # once the message is said
        try:
            if await act_on(verdict, live, voicemail_message=callee.voicemail_message):
                self.end(endings.VOICEMAIL)
        except engine.EngineClosed:
            return  # the reader ends the session

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("a live session task failed", exc_info=error)
            self.end(endings.INTERNAL_ERROR)

    async def _finish(self) -> None:
        """End the conversation (the engine was closed when its task stopped), with what
        the socket measured; an ender that came first keeps its `ended_by`."""
        if self._conversation is not None:
            metrics.conversation_ended()
            org_id, conversation_id = self._handshake.principal.org_id, self._conversation.id
            render = self._recording()
            analysis = self._relay.analysis if self._relay is not None else None
            if self._handed_over and self._closing in (None, *CALL_LEFT):
                if render is not None:  # the call goes on: this leg's recording is kept now
                    post_call.keep_recording_later(
                        self._ctx,
                        org_id=org_id,
                        conversation_id=conversation_id,
                        render=render,
                        policy_id=self._storage_policy_id,
                    )
                await handover.stream_left(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation.id,
                    analysis=analysis,
                )
                return
            try:
                await endings.end_conversation(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation.id,
                    ending=self._closing or endings.CLIENT_CLOSED,
                    measured=analysis.outcome() if analysis else Outcome(),
                )
            except ParleyError:
                log.exception("could not mark conversation %s ended", self._conversation.id)
            post_call.later(  # the recording kept, then the analysis: the socket closes now
                self._ctx,
                org_id=org_id,
                conversation_id=conversation_id,
                render=render,
                policy_id=self._storage_policy_id,
            )

    def _recording(self) -> Callable[[], Awaitable[bytes]] | None:
        """How to render the recording (in a worker thread), or None when there is none."""
        recorder = self._recorder
        if recorder is None or recorder.empty:
            return None
        return lambda: anyio.to_thread.run_sync(recorder.render)

    # --- inbound events ---------------------------------------------------------------------

    async def _handle(self, event: codec.Inbound) -> None:
        match event:
            case codec.Configure():
                await self._configure(event)
                return
            case codec.Hangup():
                self.end(endings.USER_HANGUP)
                return
            case codec.Mark(first_audio=first_audio):
                self._marked.set()
                if first_audio and self._relay is not None:
                    self._relay.analysis.played()
                if self._silence is not None:
                    self._silence.played()
                return
        live = self._engine
        if live is None:
            raise ConfigRequired()
        if self._silence is not None and _from_user(event):
            self._silence.user_acted()
        match event:
            case codec.AudioIn(audio=audio):
                await live.feed_audio(audio)
                if self._recorder is not None:
                    self._recorder.heard(audio)
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
            case codec.AddSystemMessage(text=text):
                await live.add_system_message(text)
            case codec.Reset(config=config):
                await self._reset(live, config)
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
        try:
            started = await starting.start(
                self._ctx, self._handshake, event, catalog_of(self._factory)
            )
        except (
            AgentDisabled,
            AgentNotAllowed,
            ConversationEnded,
            ConversationExists,
            TooManyActiveConversations,
        ) as error:
            await self.send_error(error)
            self.end(endings.refused(error.code))
            return
        if isinstance(started, starting.Refused):  # by its configuration endpoint
            self._conversation = started.conversation  # ended by `_finish`, as it says
            await self._emit(codec.ConversationCreated(started.conversation.id))
            await self.send_error(started.error)
            self.end(started.ending)
            return
        conversation, agent, event = started.conversation, started.agent, started.event
        setup, silence, history = started.setup, started.silence, started.history
        self._conversation = conversation
        self._agent_project = agent.project.id
        self._given_values = dict(event.template_variables or {})
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
            on_call=conversation.call_info is not None,
            redact=setup.redact,
            overrides=conversation.tool_overrides,
        )
        tools.use(setup.tools, built_ins=setup.built_ins)
        self._relay = Relay(
            self._ctx,
            org_id=principal.org_id,
            conversation_id=conversation.id,
            emit=self._emit,
            tools=tools,
            heard=self._codec.heard if isinstance(self._codec, codec.KnowsPlayback) else None,
            keeps_items=not setup.retention.zero_data_retention,
            redact=setup.redact,
        )
        if history:  # the conversation goes on: so do its figures
            self._relay.analysis.resume(
                conversation.latencies_ms, conversation.turns, conversation.interruptions_count
            )
        self._voice_id = event.voice_id or agent.voice_id
        input_format = engine.AudioFormat.parse(event.input_format or agent.audio_format)
        output_format = engine.AudioFormat.parse(event.output_format or agent.audio_format)
        self._storage_policy_id = setup.storage_policy_id
        # A test run's caller does not play the agent's audio: it gets it unpaced (API.md 19).
        paced = conversation.test_run_id is None
        recording_kept = self._ctx.recordings is not None or setup.storage_policy_id is not None
        if recording_kept and not setup.retention.zero_data_retention:
            self._recorder = Recorder(
                input_format,
                output_format,
                self._ctx.clock.monotonic,
                redact=setup.redact,
                paced=paced,
            )
        chosen = setup.languages
        voice_id, languages = session_languages(
            catalog_of(self._factory),
            default=chosen.default,
            additional=chosen.additional,
            mode=chosen.mode,
            voice_id=event.voice_id or agent.voice_id,
        )
        config = engine.SessionConfig(
            agent_name=agent.name,
            system_prompt=setup.system_prompt,
            welcome_message=setup.welcome_message,
            voice_id=voice_id,
            input_format=input_format,
            output_format=output_format,
            language=chosen.default,
            languages=languages,
            tools=tools.definitions(),
            keywords=agent.boosted_keywords,
            hold_welcome=event.wait_for_callee,
            history=history,
            # The recording's tone needs the times of the user's words (redaction).
            word_timings=self._recorder is not None and setup.redact,
            tuning=setup.tuning(),
            paced=paced,
        )
        self._settings = settings_of(agent, event, setup)
        if event.wait_for_callee:
            self._callee = Callee(voicemail_message=setup.voicemail_message)
        self._created = self._factory.create(config, tool_runner=tools)
        playback = self._codec
        self._silence = SilenceTimer(
            silence, self._ctx.clock, playback_pending=lambda: playback.playback_pending
        )
        await self._emit(codec.ConversationCreated(conversation.id))
        self._configured.set()
        await self._started.wait()  # the engine task enters the engine
        await self._emit(codec.ReadyToStart())
        if event.resume_note is not None and self._engine is not None:
            await self._engine.generate_reply(system_message=event.resume_note)

    async def _reset(self, live: engine.ConversationEngine, event: codec.Configure) -> None:
        """Go on with the reset's settings (reset.py); a refused one changes nothing."""
        tools, held, conversation = self._tools, self._settings, self._conversation
        if tools is None or held is None or conversation is None:
            raise ConfigRequired()
        self._settings = await reset(
            self._ctx,
            live,
            tools,
            self._silence,
            org_id=self._handshake.principal.org_id,
            conversation_id=conversation.id,
            current=held,
            event=event,
        )
        self._voice_id = self._settings.voice_id
        self._given_values = dict(event.template_variables or {})

    async def _update_tools(
        self, live: engine.ConversationEngine, items: Sequence[codec.ToolItem]
    ) -> None:
        tools, agent = self._tools, self._agent_project
        if tools is None or agent is None:
            raise ConfigRequired()
        found, built_ins = await resolve_tools(
            self._ctx, org_id=self._handshake.principal.org_id, project_id=agent, items=items
        )
        tools.use(found, built_ins=built_ins)
        await live.update_tools(tools.definitions())


def _from_user(event: codec.Inbound) -> bool:
    """True for what the user typed or keyed in: it breaks a silence as speech does."""
    return isinstance(event, codec.Dtmf) or (
        isinstance(event, codec.GenerateReply) and event.user_message is not None
    )
