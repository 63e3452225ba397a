"""The conversation session behind the WebSocket (API.md section 8), free of ASGI types.

The socket adapter (`parley.api.ws`) authenticates the handshake with `open_handshake`,
parses client frames into the commands below, and hands them to a LiveSession, which binds
the conversation, drives the engine, relays its events, stores the items, and decides when
the socket must close:

- a JWT's socket closes 1008 `token expired` once `exp` + 30 s passes (spec 5.4 rule 10);
- a session token's socket closes 1008 within 2 s of its revocation (API.md section 6);
- `POST /v1/conversations/{id}/end` closes the socket 1000 on whichever instance holds it;
- the engine ending the conversation closes it 1000.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from parley import credentials, engine, jwt
from parley.errors import (
    AgentDisabled,
    ConversationEnded,
    ConversationExists,
    ConversationNotFound,
    InsufficientScope,
    InvalidRequest,
    MultipleCredentials,
    ParleyError,
    Unauthorized,
)
from parley.records import Conversation
from parley.services import conversations
from parley.services.authn import Principal, authenticate, bearer_credential
from parley.services.context import Context

log = logging.getLogger(__name__)

WATCH_INTERVAL_SECONDS = 0.5
"""How often a live socket checks revocation, expiry and an ended conversation (< 2 s)."""
CONFIG_TIMEOUT_SECONDS = 10.0
MAX_MESSAGE_BYTES = 1024 * 1024
"""API.md section 8: a client frame over 1 MiB closes the socket with 1009."""

Send = Callable[[dict[str, Any]], Awaitable[None]]
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


@dataclass(frozen=True, slots=True)
class Handshake:
    """An authenticated handshake: who, which conversation, and what ends the socket."""

    principal: Principal
    conversation_id: str | None
    create_if_missing: bool
    expires_at: float | None
    """Unix time after which the socket closes (a JWT's `exp` + 30 s)."""
    revocable_id: str | None
    """The session token whose revocation closes the socket."""


# --- commands (parsed client frames) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Configure:
    agent: str
    project: str | None
    input_format: str | None
    output_format: str | None
    system_prompt: str | None
    welcome_message: str | None
    voice_id: str | None


@dataclass(frozen=True, slots=True)
class FeedAudio:
    audio: bytes


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class GenerateReply:
    user_message: str | None
    system_message: str | None


@dataclass(frozen=True, slots=True)
class SetExternalId:
    external_id: str


@dataclass(frozen=True, slots=True)
class UpdateSystemPrompt:
    system_prompt: str


@dataclass(frozen=True, slots=True)
class Mute:
    muted: bool


Command = Configure | FeedAudio | Say | GenerateReply | SetExternalId | UpdateSystemPrompt | Mute


async def open_handshake(
    ctx: Context,
    *,
    query_jwt: str | None,
    query_session_token: str | None,
    authorization: Sequence[str],
    conversation_id: str | None,
) -> Handshake:
    """Authenticate a WebSocket handshake: exactly one credential (API.md section 8)."""
    given = [c for c in (query_jwt, query_session_token) if c is not None]
    if len(given) + (1 if authorization else 0) > 1 or len(authorization) > 1:
        raise MultipleCredentials()
    credential = given[0] if given else bearer_credential(authorization)
    if len(credential) > credentials.MAX_CREDENTIAL_BYTES:
        raise jwt.InvalidToken()
    kind = credentials.classify(credential)
    if (query_jwt is not None and kind != "jwt") or (
        query_session_token is not None and kind != "session_token"
    ):
        raise Unauthorized()
    if kind == "jwt":
        return await _jwt_handshake(ctx, credential, conversation_id)
    principal = await authenticate(ctx, credential)
    if conversation_id is None:
        if principal.conversation_ids is not None:
            raise InsufficientScope()
    else:
        if not principal.may_access(conversation_id):
            raise InsufficientScope()
        await conversations.check_can_open(
            ctx, org_id=principal.org_id, conversation_id=conversation_id
        )
    revocable = principal.credential_id if principal.kind == "session_token" else None
    return Handshake(principal, conversation_id, False, None, revocable)


async def _jwt_handshake(ctx: Context, token: str, conversation_id: str | None) -> Handshake:
    verified = await jwt.verify(token, issuers=ctx.jwt.issuers, clock=ctx.clock)
    accessed = conversation_id if conversation_id is not None else verified.conversation_id
    await jwt.admit(
        verified,
        conversation_id=accessed,
        limiter=ctx.jwt.rate_limiter,
        replay_guard=ctx.jwt.replay_guard,
    )
    try:
        await conversations.check_can_open(ctx, org_id=verified.org_id, conversation_id=accessed)
    except ConversationNotFound:
        pass  # a JWT's conversation is created on first use
    principal = Principal(
        kind="jwt",
        org_id=verified.org_id,
        credential_id=verified.jti or "",
        token=verified,
        expires_at=float(verified.exp),
    )
    return Handshake(principal, accessed, True, verified.exp + jwt.SKEW_SECONDS, None)


class LiveSession:
    """One conversation on one socket: configure, then drive the engine until closed."""

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
        self._engine: engine.ConversationEngine | None = None
        self._conversation: Conversation | None = None
        self._spoken: list[str] = []
        self._created: engine.ConversationEngine | None = None
        self._configured = asyncio.Event()
        self._started = asyncio.Event()

    @property
    def configured(self) -> bool:
        return self._engine is not None

    async def handle(self, command: Command) -> None:
        """Apply one client command; a refused command answers an `error` message."""
        try:
            await self._dispatch(command)
        except engine.EngineClosed:
            raise
        except ParleyError as error:
            await self.send_error(error)

    async def send_error(self, error: ParleyError) -> None:
        """Send an `error` message; the socket stays open."""
        message: dict[str, Any] = {
            "type": "error",
            "error": {"message": error.message, "code": error.code},
        }
        if error.param_errors:
            message["param_errors"] = error.param_errors
        await self._send(message)

    async def _dispatch(self, command: Command) -> None:
        if isinstance(command, Configure):
            await self._configure(command)
            return
        live = self._engine
        if live is None:
            raise ConfigRequired()
        match command:
            case FeedAudio(audio=audio):
                await live.feed_audio(audio)
            case Say(text=text):
                await live.say(text)
            case GenerateReply(user_message=user, system_message=system):
                await live.generate_reply(user_message=user, system_message=system)
                if user is not None:
                    await self._store("user", user.strip())  # the user's typed words
            case UpdateSystemPrompt(system_prompt=prompt):
                await live.update_system_prompt(prompt)
            case Mute(muted=True):
                await live.mute()
            case Mute(muted=False):
                await live.unmute()
            case SetExternalId(external_id=external_id):
                await conversations.set_external_id(
                    self._ctx,
                    org_id=self._handshake.principal.org_id,
                    conversation_id=self._conversation_id,
                    external_id=external_id,
                )

    async def _configure(self, command: Configure) -> None:
        if self._engine is not None:
            raise AlreadyConfigured()
        principal = self._handshake.principal
        token = principal.token
        for requested in (command.input_format, command.output_format):
            if requested is not None:
                engine.AudioFormat.parse(requested)  # refuse before the conversation goes live
        try:
            conversation, agent = await conversations.start_live(
                self._ctx,
                org_id=principal.org_id,
                conversation_id=self._handshake.conversation_id,
                create_if_missing=self._handshake.create_if_missing,
                agent=command.agent,
                project=command.project,
                end_user=token.sub if token is not None else None,
            )
        except (AgentDisabled, ConversationEnded, ConversationExists) as error:
            await self.send_error(error)
            await self._close(1008, error.code)
            return
        self._conversation = conversation
        config = engine.SessionConfig(
            agent_name=agent.name,
            system_prompt=command.system_prompt
            if command.system_prompt is not None
            else agent.system_prompt,
            welcome_message=command.welcome_message
            if command.welcome_message is not None
            else agent.welcome_message,
            voice_id=command.voice_id or agent.voice_id,
            input_format=engine.AudioFormat.parse(command.input_format or agent.audio_format),
            output_format=engine.AudioFormat.parse(command.output_format or agent.audio_format),
            language=agent.language,
        )
        self._created = self._factory.create(config)
        await self._send({"type": "conversation_created", "conversation_id": conversation.id})
        self._configured.set()
        await self._started.wait()  # relay_events enters the engine in its own task
        await self._send({"type": "ready_to_start_conversation"})

    @property
    def _conversation_id(self) -> str:
        assert self._conversation is not None  # noqa: S101 (only called once configured)
        return self._conversation.id

    async def relay_events(self) -> None:
        """Run the engine once configured: forward its events to the client and store the
        utterances, until it stops. The engine is entered and left in this one task."""
        await self._configured.wait()
        assert self._created is not None  # noqa: S101 (set before _configured)
        async with self._created as running:
            self._engine = running
            self._started.set()
            async for event in running.events():
                await self._relay(event)

    async def _relay(self, event: engine.EngineEvent) -> None:
        match event:
            case engine.InputText(text=text, language=language):
                await self._store("user", text)
                await self._send({"type": "input_text", "text": text, "language": language})
            case engine.AudioChunk(audio=audio, text=text):
                if text:
                    self._spoken.append(text)
                await self._send({"type": "audio_chunk", "audio": _b64(audio), "text": text})
            case engine.AssistantStartedSpeaking():
                self._spoken = []
                await self._send({"type": "assistant_started_speaking"})
            case engine.AssistantFinishedSpeaking():
                await self._store("assistant", " ".join(self._spoken))
                await self._send({"type": "assistant_finished_speaking"})
            case engine.InterruptedResponse(text=text):
                await self._store("assistant", text)
                await self._send({"type": "interrupted_response", "text": text})
            case engine.UserStartedSpeaking():
                await self._send({"type": "user_started_speaking"})
            case engine.UserFinishedSpeaking():
                await self._send({"type": "user_finished_speaking"})
            case engine.AssistantEndedConversation():
                await self._send({"type": "assistant_ended_conversation"})
                await self._close(1000, "conversation ended")
            case engine.EngineWarning(code=code, message=message):
                await self._send({"type": "warning", "warning": {"message": message, "code": code}})

    async def _store(self, role: str, text: str) -> None:
        if text:
            await conversations.add_item(
                self._ctx,
                org_id=self._handshake.principal.org_id,
                conversation_id=self._conversation_id,
                role=role,
                text=text,
            )

    async def watch(self) -> None:
        """Close the socket when its token expires or is revoked, or the conversation ends."""
        handshake = self._handshake
        while True:
            await asyncio.sleep(WATCH_INTERVAL_SECONDS)
            if handshake.expires_at is not None and self._ctx.clock.time() > handshake.expires_at:
                await self._close(1008, "token expired")
                return
            if handshake.revocable_id is not None and await self._ctx.revocations.is_revoked(
                handshake.revocable_id
            ):
                await self._close(1008, "session token revoked")
                return
            if self._conversation is not None and await self._ctx.revocations.is_revoked(
                conversations.ended_marker(handshake.principal.org_id, self._conversation.id)
            ):
                await self._close(1000, "conversation ended")
                return

    async def finish(self) -> None:
        """Stop the engine and mark the conversation ended."""
        if self._engine is not None:
            await self._engine.close()
        if self._conversation is not None:
            await conversations.finish_live(
                self._ctx,
                org_id=self._handshake.principal.org_id,
                conversation_id=self._conversation.id,
            )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
