"""`/v1/sts/ws`: the conversation WebSocket (spec section 4.3; API.md section 8).

A refused handshake is answered as HTTP with the REST status and envelope (the ASGI
`websocket.http.response` extension, through Starlette's `send_denial_response`). Frames
are JSON text objects with a `type`; a malformed frame gets an `error` message and the
socket stays open; a frame over 1 MiB closes it with 1009.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, WebSocket
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError
from starlette import status
from starlette.websockets import WebSocketDisconnect, WebSocketState

from parley.api.deps import get_context
from parley.api.errors import error_response
from parley.api.text import Label
from parley.api.text import Text as FreeText
from parley.engine import EngineClosed, EngineFactory
from parley.errors import (
    InvalidJson,
    InvalidRequest,
    MultipleCredentials,
    ParleyError,
    ValidationFailed,
)
from parley.services import live

log = logging.getLogger("parley.ws")
router = APIRouter()

MAX_MESSAGE_BYTES = live.MAX_MESSAGE_BYTES
Text = Annotated[FreeText, StringConstraints(max_length=20_000)]


class UnknownMessageType(InvalidRequest):
    code = "unknown_message_type"
    message = "Unknown message type."


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ConfigFrame(_Frame):
    type: Literal["config"]
    agent: Annotated[Label, StringConstraints(min_length=1, max_length=64)]
    project: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None
    input_format: Label | None = None
    output_format: Label | None = None
    system_prompt: Text | None = None
    welcome_message: Annotated[FreeText, StringConstraints(max_length=2_000)] | None = None
    voice_id: Annotated[Label, StringConstraints(min_length=1, max_length=100)] | None = None


class AudioFrame(_Frame):
    type: Literal["audio_chunk"]
    audio: Annotated[str, StringConstraints(max_length=16_384)]


class SayFrame(_Frame):
    type: Literal["say"]
    text: Annotated[FreeText, StringConstraints(min_length=1, max_length=2_000)]


class GenerateReplyFrame(_Frame):
    type: Literal["generate_reply"]
    user_message: Annotated[FreeText, StringConstraints(max_length=2_000)] | None = None
    system_message: Annotated[FreeText, StringConstraints(max_length=2_000)] | None = None


class ExternalIdFrame(_Frame):
    type: Literal["set_external_id"]
    external_id: Annotated[Label, StringConstraints(min_length=1, max_length=256)]


class SystemPromptFrame(_Frame):
    type: Literal["update_system_prompt"]
    system_prompt: Text


class MuteFrame(_Frame):
    type: Literal["mute", "unmute"]


ClientFrame = Annotated[
    ConfigFrame
    | AudioFrame
    | SayFrame
    | GenerateReplyFrame
    | ExternalIdFrame
    | SystemPromptFrame
    | MuteFrame,
    Field(discriminator="type"),
]
_frames: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)
_TYPES = {
    "config",
    "audio_chunk",
    "say",
    "generate_reply",
    "set_external_id",
    "update_system_prompt",
    "mute",
    "unmute",
}


def parse_frame(text: str) -> live.Command:
    """Parse one client frame strictly into a command, or raise a request error."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidJson("The message is not valid JSON.") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise ValidationFailed(param_errors={"type": "every message is an object with a type"})
    if raw["type"] not in _TYPES:
        raise UnknownMessageType(f"Unknown message type: {raw['type'][:40]!r}.")
    try:
        frame = _frames.validate_python(raw)
    except ValidationError as error:
        raise ValidationFailed(param_errors=_param_errors(error)) from None
    return _command_of(frame)


def _command_of(frame: Any) -> live.Command:
    match frame:
        case ConfigFrame():
            return live.Configure(
                agent=frame.agent,
                project=frame.project,
                input_format=frame.input_format,
                output_format=frame.output_format,
                system_prompt=frame.system_prompt,
                welcome_message=frame.welcome_message,
                voice_id=frame.voice_id,
            )
        case AudioFrame():
            try:
                return live.FeedAudio(base64.b64decode(frame.audio, validate=True))
            except (binascii.Error, ValueError):
                raise ValidationFailed(param_errors={"audio": "must be base64"}) from None
        case SayFrame():
            return live.Say(frame.text)
        case GenerateReplyFrame():
            return live.GenerateReply(frame.user_message, frame.system_message)
        case ExternalIdFrame():
            return live.SetExternalId(frame.external_id)
        case SystemPromptFrame():
            return live.UpdateSystemPrompt(frame.system_prompt)
        case _:
            return live.Mute(muted=frame.type == "mute")


def _param_errors(error: ValidationError) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in error.errors():
        location = [str(p) for p in item.get("loc", ()) if p not in _TYPES]
        found.setdefault(".".join(location) or "message", str(item.get("msg", "is invalid")))
    return found


@router.websocket("/v1/sts/ws")
async def conversation_socket(websocket: WebSocket) -> None:
    """Authenticate, accept, and run one conversation until either side closes."""
    ctx = get_context(websocket)
    query = websocket.query_params
    try:
        if len(query.getlist("jwt")) > 1 or len(query.getlist("session_token")) > 1:
            raise MultipleCredentials()
        handshake = await live.open_handshake(
            ctx,
            query_jwt=query.get("jwt"),
            query_session_token=query.get("session_token"),
            authorization=websocket.headers.getlist("authorization"),
            conversation_id=query.get("conversation_id"),
        )
    except ParleyError as error:
        await websocket.send_denial_response(error_response(error))
        return
    await websocket.accept()
    socket = _Socket(websocket)
    factory: EngineFactory = websocket.app.state.engine_factory
    session = live.LiveSession(ctx, factory, handshake, send=socket.send, close=socket.close)
    try:
        async with asyncio.TaskGroup() as group:
            socket.tasks = [
                group.create_task(_read(websocket, session, socket)),
                group.create_task(session.relay_events()),
                group.create_task(session.watch()),
            ]
    except* WebSocketDisconnect:
        pass
    finally:
        await session.finish()
        await socket.close(status.WS_1000_NORMAL_CLOSURE, "")


async def _read(websocket: WebSocket, session: live.LiveSession, socket: _Socket) -> None:
    configured_by = asyncio.get_running_loop().time() + live.CONFIG_TIMEOUT_SECONDS
    while True:
        timeout = None if session.configured else configured_by - asyncio.get_running_loop().time()
        try:
            message = await asyncio.wait_for(websocket.receive(), timeout)
        except TimeoutError:
            await session.send_error(live.ConfigTimeout())
            await socket.close(status.WS_1008_POLICY_VIOLATION, "config timeout")
            return
        if message["type"] == "websocket.disconnect":
            socket.stop()
            return
        text = message.get("text")
        data = text if text is not None else message.get("bytes") or b""
        if len(data) > MAX_MESSAGE_BYTES:
            await socket.close(status.WS_1009_MESSAGE_TOO_BIG, "message too big")
            return
        if text is None:
            await session.send_error(
                ValidationFailed(param_errors={"message": "send JSON text frames"})
            )
            continue
        try:
            command = parse_frame(text)
        except ParleyError as error:
            await session.send_error(error)
            continue
        try:
            await session.handle(command)
        except EngineClosed:
            return


class _Socket:
    """Sends frames and closes the socket once, then stops the session's tasks."""

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._closed = False
        self.tasks: list[asyncio.Task[None]] = []

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed or self._websocket.application_state != WebSocketState.CONNECTED:
            return
        try:
            await self._websocket.send_text(json.dumps(message, separators=(",", ":")))
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.stop()

    async def close(self, code: int, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        if self._websocket.application_state == WebSocketState.CONNECTED:
            try:
                await self._websocket.close(code, reason)
            except (RuntimeError, OSError):
                log.debug("socket already gone at close")
        self.stop()

    def stop(self) -> None:
        """Cancel the session's tasks (reading, relaying, watching)."""
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        self._closed = True
