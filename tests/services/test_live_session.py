"""The conversation session's lifecycle through its codec seam, without uvicorn.

LiveSession runs on the real database and stores (tests/conftest.py), with an in-memory
socket (a queue of inbound frames, the frames sent, the close) and a scripted engine that
records its calls and emits what a test pushes. Parley's own codec carries the frames; a
small phone-like codec checks what the seam offers a carrier (a call configured from its
pending conversation, DTMF, hang-up, acknowledged playback).
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import pytest

from parley import engine
from parley.engine import EngineClosed, EngineEvent, SessionConfig, ToolDefinition, ToolRunner
from parley.errors import ValidationFailed
from parley.records import OPERATOR
from parley.services import Context, agents, conversations, session_tokens
from parley.services.live import Handshake, LiveSession, codec, open_handshake
from parley.services.orgs import NewOrganization
from parley.wires.parley_codec import ParleyCodec
from tests.factories import make_agent, make_org

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 10.0
"""Upper bound on any wait of these tests: a guard against a hang, not a rule (the
watchdog checks every 0.5 s). 3 s was too short for a session's ending on PostgreSQL
under a loaded suite (a token expiry's close, session 27)."""


# --- the doubles -----------------------------------------------------------------------------


class ScriptedEngine:
    """A ConversationEngine that records its input calls and emits what `push` is given
    (an exception pushed makes events() raise: the engine task fails)."""

    def __init__(self, config: SessionConfig, tool_runner: ToolRunner | None) -> None:
        self.config = config
        self.tool_runner = tool_runner
        self.calls: list[tuple[str, Any]] = []
        self.closed = False
        self._queue: asyncio.Queue[EngineEvent | Exception | None] = asyncio.Queue()

    def push(self, item: EngineEvent | Exception) -> None:
        self._queue.put_nowait(item)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def events(self) -> AsyncIterator[EngineEvent]:
        while (item := await self._queue.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item

    async def _record(self, name: str, value: Any = None) -> None:
        if self.closed:
            raise EngineClosed()
        self.calls.append((name, value))

    async def feed_audio(self, audio: bytes) -> None:
        await self._record("feed_audio", audio)

    async def say(self, text: str) -> None:
        await self._record("say", text)

    async def generate_reply(
        self, *, user_message: str | None = None, system_message: str | None = None
    ) -> None:
        await self._record("generate_reply", user_message)

    async def update_system_prompt(self, text: str) -> None:
        await self._record("update_system_prompt", text)

    async def add_system_message(self, text: str) -> None:
        await self._record("add_system_message", text)

    async def change_voice(self, voice_id: str) -> None:
        await self._record("change_voice", voice_id)

    async def update_tools(self, tools: tuple[ToolDefinition, ...]) -> None:
        await self._record("update_tools", tools)

    async def mute(self) -> None:
        await self._record("mute")

    async def unmute(self) -> None:
        await self._record("unmute")

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)


class ScriptedFactory:
    """Makes ScriptedEngines and keeps them."""

    def __init__(self) -> None:
        self.engines: list[ScriptedEngine] = []

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def create(self, config: SessionConfig, *, tool_runner: ToolRunner | None = None) -> Any:
        made = ScriptedEngine(config, tool_runner)
        self.engines.append(made)
        return made


class MemorySocket:
    """The accepted socket as the session sees it: inbound frames queued by the test, the
    frames sent, and the close."""

    def __init__(self) -> None:
        self.inbound: asyncio.Queue[codec.Frame | None] = asyncio.Queue()
        self.sent: list[codec.Frame] = []
        self.closed: tuple[int, str] | None = None

    def push(self, frame: dict[str, Any] | codec.Frame | None) -> None:
        self.inbound.put_nowait(json.dumps(frame) if isinstance(frame, dict) else frame)

    async def receive(self) -> codec.Frame | None:
        return await self.inbound.get()

    async def send(self, frame: codec.Frame) -> None:
        self.sent.append(frame)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(frame) for frame in self.sent]

    async def message(self, kind: str, *, key: str = "type") -> dict[str, Any]:
        """The first message sent of this kind, once it is sent (bounded wait)."""
        for _ in range(round(WAIT_SECONDS / 0.01)):
            for message in self.messages():
                if message.get(key) == kind:
                    return message
            await asyncio.sleep(0.01)
        raise AssertionError(f"no {kind!r} message; sent: {self.sent}")


@dataclasses.dataclass
class Live:
    """A session running on a memory socket, and what it runs on."""

    ctx: Context
    org: NewOrganization
    agent: str
    socket: MemorySocket
    factory: ScriptedFactory
    session: LiveSession
    task: asyncio.Task[None]

    @property
    def engine(self) -> ScriptedEngine:
        assert len(self.factory.engines) == 1
        return self.factory.engines[0]

    async def configure(self, **fields: Any) -> str:
        """Send a config; return the conversation's ID once ready."""
        self.socket.push({"type": "config", "agent": self.agent, **fields})
        created = await self.socket.message("conversation_created")
        await self.socket.message("ready_to_start_conversation")
        conversation_id: str = created["conversation_id"]
        return conversation_id

    async def closed(self) -> tuple[int, str]:
        await asyncio.wait_for(self.task, WAIT_SECONDS)
        assert self.socket.closed is not None
        return self.socket.closed

    async def status(self, conversation_id: str) -> str:
        found = await conversations.get_conversation(
            self.ctx, org_id=self.org.org.id, conversation_id=conversation_id
        )
        return found.status


async def api_key_handshake(
    ctx: Context, org: NewOrganization, conversation_id: str | None = None
) -> Handshake:
    return await open_handshake(
        ctx,
        query_jwt=None,
        query_session_token=None,
        authorization=[f"Bearer {org.api_key.secret}"],
        conversation_id=conversation_id,
    )


class Start(Protocol):
    """Starts a session on a memory socket (a new organization and agent unless given)."""

    async def __call__(
        self,
        *,
        handshake: Handshake | None = None,
        org: NewOrganization | None = None,
        agent: str | None = None,
        wire: codec.Codec | None = None,
        config_timeout: float = 10.0,
        opening: Sequence[codec.Inbound] = (),
    ) -> Live: ...


@pytest.fixture
async def start(ctx: Context) -> AsyncIterator[Start]:
    """Start sessions on memory sockets; any left running is stopped at the end."""
    async with start_sessions(ctx) as begin:
        yield begin


@asynccontextmanager
async def start_sessions(ctx: Context) -> AsyncIterator[Start]:
    """`start` for a context of the test's own."""
    running: list[Live] = []

    async def begin(
        *,
        handshake: Handshake | None = None,
        org: NewOrganization | None = None,
        agent: str | None = None,
        wire: codec.Codec | None = None,
        config_timeout: float = 10.0,
        opening: Sequence[codec.Inbound] = (),
    ) -> Live:
        org = org or await make_org(ctx)
        agent = agent or (await make_agent(ctx, org.org.id)).name
        socket, factory = MemorySocket(), ScriptedFactory()
        session = LiveSession(
            ctx,
            factory,
            handshake or await api_key_handshake(ctx, org),
            wire or ParleyCodec(),
            send=socket.send,
            close=socket.close,
            config_timeout=config_timeout,
        )
        task = asyncio.create_task(session.run(socket.receive, opening=opening))
        live = Live(ctx, org, agent, socket, factory, session, task)
        running.append(live)
        return live

    yield begin
    for live in running:
        if not live.task.done():
            live.socket.push(None)
            await asyncio.wait_for(live.task, WAIT_SECONDS)


# --- configuration ---------------------------------------------------------------------------


async def test_session_config_then_created_and_ready(start: Start) -> None:
    live = await start()
    conversation_id = await live.configure(voice_id="us_male")
    types = [message["type"] for message in live.socket.messages()]
    assert types == ["conversation_created", "ready_to_start_conversation"]
    assert live.engine.config.voice_id == "us_male"
    assert await live.status(conversation_id) == "live"


async def test_session_message_before_config_refused_config_required(start: Start) -> None:
    live = await start()
    live.socket.push({"type": "say", "text": "hello"})
    error = await live.socket.message("error")
    assert error["error"]["code"] == "config_required"
    await live.configure()  # the socket stayed open
    assert live.socket.closed is None


async def test_session_no_config_in_time_closes_1008(start: Start) -> None:
    live = await start(config_timeout=0.2)
    assert await live.closed() == (1008, "config timeout")
    assert live.socket.messages()[-1]["error"]["code"] == "config_timeout"
    assert live.factory.engines == []


async def test_session_second_config_refused_already_configured(start: Start) -> None:
    live = await start()
    await live.configure()
    live.socket.push({"type": "config", "agent": live.agent})
    error = await live.socket.message("error")
    assert error["error"]["code"] == "already_configured"
    assert len(live.factory.engines) == 1
    assert live.socket.closed is None


async def test_session_disabled_agent_error_closes_1008_nothing_live(
    ctx: Context, start: Start
) -> None:
    live = await start()
    await agents.disable_agent(
        ctx, org_id=live.org.org.id, ref=live.agent, project=None, actor=OPERATOR
    )
    live.socket.push({"type": "config", "agent": live.agent})
    assert await live.closed() == (1008, "agent_disabled")
    assert [m["error"]["code"] for m in live.socket.messages()] == ["agent_disabled"]
    assert live.session.conversation_id is None
    assert live.factory.engines == []
    listed = await conversations.list_conversations(
        ctx,
        org_id=live.org.org.id,
        project=None,
        agent=None,
        only_ids=None,
        cursor=None,
        limit=100,
    )
    assert listed.items == []


# --- ending ----------------------------------------------------------------------------------


async def test_session_client_leaving_ends_conversation(start: Start) -> None:
    live = await start()
    conversation_id = await live.configure()
    live.socket.push(None)
    assert await live.closed() == (1000, "")
    assert live.engine.closed
    assert await live.status(conversation_id) == "ended"


async def test_session_engine_task_failure_closes_1011_and_ends(start: Start) -> None:
    live = await start()
    conversation_id = await live.configure()
    live.engine.push(RuntimeError("the engine broke"))
    assert await live.closed() == (1011, "internal error")
    assert await live.status(conversation_id) == "ended"


async def test_session_assistant_goodbye_closes_1000_conversation_ended(start: Start) -> None:
    live = await start()
    conversation_id = await live.configure()
    live.engine.push(engine.AssistantEndedConversation())
    assert await live.closed() == (1000, "conversation ended")
    assert live.socket.messages()[-1] == {"type": "assistant_ended_conversation"}
    assert await live.status(conversation_id) == "ended"


async def test_session_ended_elsewhere_closes_1000(ctx: Context, start: Start) -> None:
    live = await start()
    conversation_id = await live.configure()
    await conversations.end_conversation(
        ctx, org_id=live.org.org.id, conversation_id=conversation_id, actor=OPERATOR
    )
    assert await live.closed() == (1000, "conversation ended")
    assert await live.status(conversation_id) == "ended"


async def test_session_token_revoked_closes_1008(ctx: Context, start: Start) -> None:
    org = await make_org(ctx)
    issued = await session_tokens.create_session_token(ctx, org_id=org.org.id, actor=OPERATOR)
    handshake = await open_handshake(
        ctx,
        query_jwt=None,
        query_session_token=issued.secret,
        authorization=[],
        conversation_id=None,
    )
    live = await start(org=org, handshake=handshake)
    conversation_id = await live.configure()
    await session_tokens.revoke_session_token(
        ctx, org_id=org.org.id, token_id=issued.token.id, actor=OPERATOR
    )
    assert await live.closed() == (1008, "session token revoked")
    assert await live.status(conversation_id) == "ended"


class MovableClock:
    """The real clock, moved ahead by `ahead` seconds."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def time(self) -> float:
        return time.time() + self.ahead

    def monotonic(self) -> float:
        return time.monotonic()


async def test_session_token_expiry_passed_closes_1008_token_expired(ctx: Context) -> None:
    """The expiry passes once the conversation runs (the clock is moved past it), so the
    watchdog's close never races the configuration (the socket's first tick is 0.5 s in:
    a busy machine took longer than that to create the conversation)."""
    clock = MovableClock()
    moved = dataclasses.replace(ctx, clock=clock)
    org = await make_org(moved)
    handshake = dataclasses.replace(
        await api_key_handshake(moved, org), expires_at=clock.time() + 3600
    )
    async with start_sessions(moved) as start:
        live = await start(org=org, handshake=handshake)
        conversation_id = await live.configure()
        clock.ahead = 3601
        assert await live.closed() == (1008, "token expired")
        assert await live.status(conversation_id) == "ended"


async def test_session_frame_over_1mib_closes_1009(start: Start) -> None:
    live = await start()
    await live.configure()
    live.socket.push(json.dumps({"type": "say", "text": "x" * (1024 * 1024)}))
    assert await live.closed() == (1009, "message too big")
    assert live.engine.calls == []


async def test_session_binary_frame_error_socket_stays_open(start: Start) -> None:
    live = await start()
    live.socket.push(b"\x00\x01")
    error = await live.socket.message("error")
    assert error["error"]["code"] == "validation_error"
    assert error["param_errors"] == {"message": "send JSON text frames"}
    await live.configure()
    assert live.socket.closed is None


# --- what the conversation does ------------------------------------------------------------


async def test_session_items_stored_user_and_assistant(ctx: Context, start: Start) -> None:
    live = await start()
    conversation_id = await live.configure()
    live.socket.push({"type": "generate_reply", "user_message": "  Where is my order? "})
    for _ in range(200):  # the typed turn is stored before the scripted engine answers it
        typed = await conversations.get_conversation(
            ctx, org_id=live.org.org.id, conversation_id=conversation_id
        )
        if typed.items:
            break
        await asyncio.sleep(0.01)
    for event in (
        engine.AssistantStartedSpeaking(),
        engine.AudioChunk(audio=b"\x00\x00", text="It shipped."),
        engine.AudioChunk(audio=b"\x00\x00", text=""),
        engine.AssistantFinishedSpeaking(),
    ):
        live.engine.push(event)
    await live.socket.message("assistant_finished_speaking")
    found = await conversations.get_conversation(
        ctx, org_id=live.org.org.id, conversation_id=conversation_id
    )
    assert [(item.role, item.text) for item in found.items] == [
        ("user", "Where is my order?"),
        ("assistant", "It shipped."),
    ]
    assert ("generate_reply", "  Where is my order? ") in live.engine.calls


async def test_session_client_events_reach_the_engine(start: Start) -> None:
    live = await start()
    await live.configure()
    for frame in (
        {"type": "audio_chunk", "audio": "AAA="},
        {"type": "say", "text": "Hello."},
        {"type": "mute"},
        {"type": "unmute"},
        {"type": "update_system_prompt", "system_prompt": "Be terse."},
    ):
        live.socket.push(frame)
    for _ in range(round(WAIT_SECONDS / 0.01)):
        if len(live.engine.calls) == 5:
            break
        await asyncio.sleep(0.01)
    assert live.engine.calls == [
        ("feed_audio", b"\x00\x00"),
        ("say", "Hello."),
        ("mute", None),
        ("unmute", None),
        ("update_system_prompt", "Be terse."),
    ]


async def test_session_engine_events_encoded_by_parley_codec(start: Start) -> None:
    live = await start()
    await live.configure()
    live.engine.push(engine.InputText(text="hi", language="en"))
    live.engine.push(engine.EngineWarning(code="voice_not_available", message="No voice."))
    await live.socket.message("warning")
    assert live.socket.sent[-2:] == [
        '{"type":"input_text","text":"hi","language":"en"}',
        '{"type":"warning","warning":{"message":"No voice.","code":"voice_not_available"}}',
    ]


# --- the seam as a phone carrier uses it ----------------------------------------------------


class PhoneCodec:
    """A carrier-like wire: `{"event": ...}` frames, audio sent is acknowledged by marks,
    WebSocket tools cannot run. Just enough to check what the seam offers a carrier."""

    client_tools = False

    def __init__(self) -> None:
        self.unacknowledged = 0

    @property
    def playback_pending(self) -> bool:
        return self.unacknowledged > 0

    def decode(self, data: codec.Frame) -> Sequence[codec.Inbound]:
        raw = json.loads(data)
        match raw["event"]:
            case "dtmf":
                return (codec.Dtmf(raw["digits"]),)
            case "mark":
                self.unacknowledged -= 1
                return (codec.Mark(raw["name"]),)
            case "stop":
                return (codec.Hangup(),)
        raise ValidationFailed(param_errors={"event": "unknown"})

    def encode(self, message: codec.Outbound) -> Sequence[codec.Frame]:
        if isinstance(message, engine.AudioChunk):
            self.unacknowledged += 1
            return (json.dumps({"event": "media"}), json.dumps({"event": "mark"}))
        if isinstance(message, codec.Closing):
            return ()
        return (json.dumps({"event": "other", "kind": type(message).__name__}),)


async def phone_call(
    ctx: Context, start: Start, *, tools: tuple[codec.ToolItem, ...] | None = None
) -> tuple[Live, str]:
    """A session for a pending conversation, configured from it (no client `config`)."""
    org = await make_org(ctx)
    agent = await make_agent(ctx, org.org.id)
    pending = await conversations.create_conversation(
        ctx, org_id=org.org.id, agent=agent.name, project=None, conversation_id=None
    )
    live = await start(
        org=org,
        agent=agent.name,
        handshake=await api_key_handshake(ctx, org, pending.id),
        wire=PhoneCodec(),
        opening=[codec.Configure(agent=None, input_format="mulaw_8000", tools=tools)],
    )
    await live.socket.message("ReadyToStart", key="kind")
    return live, pending.id


async def test_session_call_configured_from_its_pending_conversation(
    ctx: Context, start: Start
) -> None:
    live, conversation_id = await phone_call(ctx, start)
    assert live.session.conversation_id == conversation_id
    assert live.engine.config.agent_name == live.agent
    assert live.engine.config.input_format == engine.AudioFormat.MULAW_8000
    assert await live.status(conversation_id) == "live"


async def test_session_dtmf_becomes_user_turn(ctx: Context, start: Start) -> None:
    live, conversation_id = await phone_call(ctx, start)
    live.socket.push({"event": "dtmf", "digits": "123"})
    for _ in range(round(WAIT_SECONDS / 0.01)):
        if live.engine.calls:
            break
        await asyncio.sleep(0.01)
    assert live.engine.calls == [("generate_reply", "DTMF: 123")]
    for _ in range(round(WAIT_SECONDS / 0.01)):  # the turn is stored beside the engine's call
        found = await conversations.get_conversation(
            ctx, org_id=live.org.org.id, conversation_id=conversation_id
        )
        if found.items:
            break
        await asyncio.sleep(0.01)
    assert [(item.role, item.text) for item in found.items] == [("user", "DTMF: 123")]


async def test_session_hangup_ends_conversation(ctx: Context, start: Start) -> None:
    live, conversation_id = await phone_call(ctx, start)
    live.socket.push({"event": "stop"})
    assert await live.closed() == (1000, "")
    assert await live.status(conversation_id) == "ended"


async def test_session_goodbye_closes_after_playback_acknowledged(
    ctx: Context, start: Start
) -> None:
    live, _ = await phone_call(ctx, start)
    live.engine.push(engine.AudioChunk(audio=b"\xff", text="Goodbye."))
    live.engine.push(engine.AssistantEndedConversation())
    await live.socket.message("AssistantEndedConversation", key="kind")
    await asyncio.sleep(0.2)
    assert live.socket.closed is None  # the goodbye's audio is not acknowledged yet
    live.socket.push({"event": "mark", "name": "1"})
    assert await live.closed() == (1000, "conversation ended")


async def test_session_websocket_tool_on_wire_without_client_gets_error_output(
    ctx: Context, start: Start
) -> None:
    parameters = {"type": "object", "properties": {}}
    inline = codec.InlineTool(name="lookup", description="Looks up.", parameters=parameters)
    live, _ = await phone_call(ctx, start, tools=(inline,))
    assert [tool.name for tool in live.engine.config.tools] == ["lookup"]
    runner = live.engine.tool_runner
    assert runner is not None
    output = await runner.run(engine.ToolInvocation(id="c1", name="lookup", arguments={}))
    assert output == {"error": "no client connected"}


# --- the seam itself -------------------------------------------------------------------------


def test_session_package_never_imports_a_wire() -> None:
    """Convention 21: the session speaks events; only a codec (parley.wires) sees frames."""
    package = Path(__file__).parents[2] / "src/parley/services/live"
    names = sorted(path.name for path in package.glob("*.py"))
    assert {"session.py", "relay.py", "tools.py", "codec.py"} <= set(names)
    for name in names:
        imported: set[str] = set()
        for node in ast.walk(ast.parse((package / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                imported |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
        wired = [m for m in imported if m.startswith("parley.wires") or m.endswith(".frames")]
        assert wired == [], name
