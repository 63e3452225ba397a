"""docs/tools.md, run as written: its endpoint, its tool, its agent, its conversation.

The tool and agent definitions are read from the guide's curl blocks, the SDK call from its
Python block and the conversation from its `talk.py` command line, so the test breaks when
the guide drifts. A real uvicorn server (outbound http and private addresses allowed, as the
guide's development setup says), the guide's endpoint examples/tools/booking_endpoint.py and
its text client examples/tools/talk.py as subprocesses, and a real OpenAI-protocol server on
loopback scripted to call `book_table` and then answer in words.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import shlex
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from standardwebhooks import Webhook

from tests.cli.test_startup_errors import free_port
from tests.e2e.conftest import Customer, Server
from tests.llm_server import Call, ChatServer, Round, running_chat_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
ENDPOINT = ROOT / "examples" / "tools" / "booking_endpoint.py"
TALK = ROOT / "examples" / "tools" / "talk.py"
GUIDE_PORT = 8080
ARGUMENTS = {"people": 2, "time": "19:30", "name": "Ada"}


def guide_json(path: str) -> dict[str, Any]:
    """The JSON body of the guide's `curl … $B{path} … <<'JSON'` block."""
    pattern = rf"curl [^\n]*\$B{re.escape(path)} [^\n]*<<'JSON'\n(.*?)\nJSON\n"
    (body,) = re.findall(pattern, GUIDE, re.DOTALL)
    value: dict[str, Any] = json.loads(body)
    return value


def guide_sdk_arguments() -> dict[str, Any]:
    """The keyword arguments of the guide's `client.tools.create(...)` call."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", GUIDE, re.DOTALL) if "tools." in b]
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "client.tools.create":
            return {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    raise AssertionError("the guide shows no client.tools.create call")


def guide_talk_arguments() -> list[str]:
    """The arguments of the guide's `python examples/tools/talk.py …` command."""
    (command,) = re.findall(r"^python examples/tools/talk\.py (.*?[^\\])$", GUIDE, re.M | re.S)
    return shlex.split(command.replace("\\\n", " "))


@dataclass
class Endpoint:
    """The guide's endpoint running as a subprocess, its output collected line by line."""

    process: asyncio.subprocess.Process
    url: str
    lines: list[str] = field(default_factory=list)

    async def collect(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self.lines.append(line.decode().rstrip("\n"))

    async def wait_for(self, text: str, within: float = 10.0) -> None:
        for _ in range(round(within / 0.02)):
            if any(text in line for line in self.lines):
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the endpoint did not print {text!r}: {self.lines}")


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    """The guide's development setup: a language model, http and loopback endpoints allowed."""
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
        "outbound_allow_http": True,
        "outbound_allow_private_networks": True,
    }


@pytest.fixture
async def tool(customer: Customer) -> tuple[dict[str, Any], int]:
    """The guide's tool, created with its curl body on a free port instead of 8080."""
    port = free_port()
    body = guide_json("/v1/tools")
    assert body["endpoint_url"] == f"http://127.0.0.1:{GUIDE_PORT}/bookings"
    body["endpoint_url"] = f"http://127.0.0.1:{port}/bookings"
    created = await customer.api.post("/v1/tools", json=body)
    assert created.status_code == 201, created.text
    return created.json(), port


@pytest.fixture
async def endpoint(tool: tuple[dict[str, Any], int]) -> AsyncIterator[Endpoint]:
    """examples/tools/booking_endpoint.py started as the guide says, with the tool's secret."""
    created, port = tool
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ENDPOINT),
        "--port",
        str(port),
        env={"BOOKING_SIGNING_SECRET": created["signing_secret"]},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    running = Endpoint(process, f"http://127.0.0.1:{port}/bookings")
    reader = asyncio.create_task(running.collect())
    try:
        await running.wait_for("listening on")
        yield running
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), 10)
        await asyncio.wait_for(reader, 5)


async def run_talk(server: Server, customer: Customer) -> list[dict[str, Any]]:
    """Run the guide's talk.py command against the server; return the frames it received."""
    arguments = guide_talk_arguments()
    arguments[arguments.index("--key") + 1] = customer.api_key
    talk = await asyncio.create_subprocess_exec(
        sys.executable,
        str(TALK),
        "--url",
        server.http,
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(talk.communicate(), 90)
    text = output.decode()
    assert talk.returncode == 0, text
    received = [json.loads(line[2:]) for line in text.splitlines() if line.startswith("← ")]
    assert received, text
    return received


async def test_guide_tool_called_endpoint_verifies_signature_and_answer_reaches_model(
    server: Server, customer: Customer, chat: ChatServer, endpoint: Endpoint
) -> None:
    agent = guide_json("/v1/agents")
    made = await customer.api.post("/v1/agents", json=agent)
    assert made.status_code == 201, made.text
    chat.script.rounds.append(
        Round(
            text=["Let me book that for you. "], calls=[Call("book_table", [json.dumps(ARGUMENTS)])]
        )
    )
    chat.script.rounds.append(Round(text=["You are booked, Ada: booking BK-0001."]))

    frames = await run_talk(server, customer)

    (processed,) = [f for f in frames if f["type"] == "tool_call_output_processed"]
    booking = {"status": "confirmed", "booking_id": "BK-0001", **ARGUMENTS}
    await endpoint.wait_for("verified call")
    assert f"verified call {processed['tool_call_id']}: booked BK-0001" in endpoint.lines
    assert processed["tool"]["name"] == "book_table"
    assert processed["response_status_code"] == 200
    assert processed["response_body"] == booking
    assert processed["error_message"] is None
    conversation_id = frames[0]["conversation_id"]
    assert processed["request_body"] == {**ARGUMENTS, "conversation_id": conversation_id}
    # The model's round after the call (the summary after the call may come later).
    tool_messages = [
        m for r in chat.requests for m in r.body.get("messages", []) if m["role"] == "tool"
    ]
    assert [json.loads(m["content"]) for m in tool_messages] == [booking]
    system = chat.requests[0].body["messages"][0]["content"]
    assert system.startswith("You take table bookings for Trattoria Roma.")
    spoken = " ".join(f["text"] for f in frames if f["type"] == "audio_chunk" and f["text"])
    assert "Hello, Trattoria Roma here." in spoken
    assert "booking BK-0001" in spoken
    stored = (await customer.api.get(f"/v1/conversations/{conversation_id}")).json()
    conversation = stored["conversation"]
    assert conversation["template_variables"] == {"restaurant": "Trattoria Roma"}
    (call,) = [c for item in conversation["items"] for c in item["tool_calls"]]
    assert call["output"] == booking


async def test_guide_endpoint_refuses_bad_signature_and_repeats_answer_for_same_key(
    tool: tuple[dict[str, Any], int], endpoint: Endpoint
) -> None:
    created, _ = tool
    body = json.dumps({**ARGUMENTS, "conversation_id": "conv_guide"})

    def signed(secret: str, call_id: str) -> dict[str, str]:
        now = datetime.now(UTC)
        signature = Webhook(secret).sign(call_id, now, body)
        return {
            "Content-Type": "application/json",
            "Idempotency-Key": call_id,
            "webhook-id": call_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        }

    forged_secret = "whsec_" + "A" * 43 + "="
    async with httpx.AsyncClient(timeout=10) as http:
        forged = await http.post(endpoint.url, content=body, headers=signed(forged_secret, "c1"))
        unsigned = await http.post(endpoint.url, content=body)
        first = await http.post(
            endpoint.url, content=body, headers=signed(created["signing_secret"], "c2")
        )
        again = await http.post(
            endpoint.url, content=body, headers=signed(created["signing_secret"], "c2")
        )
        other = await http.post(
            endpoint.url, content=body, headers=signed(created["signing_secret"], "c3")
        )
    assert (forged.status_code, unsigned.status_code) == (401, 401)
    assert first.status_code == 200
    assert again.json() == first.json()
    assert first.json()["booking_id"] == "BK-0001"
    assert other.json()["booking_id"] == "BK-0002"


@pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning")
async def test_guide_sdk_call_creates_same_tool_as_curl(server: Server, customer: Customer) -> None:
    from phonic import Phonic
    from phonic.environment import PhonicEnvironment

    arguments = guide_sdk_arguments()
    assert arguments == guide_json("/v1/tools")
    environment = PhonicEnvironment(base=f"{server.http}/v1", production=server.ws)

    def create() -> Any:
        with httpx.Client(timeout=10) as http:
            client = Phonic(api_key=customer.api_key, environment=environment, httpx_client=http)
            return client.tools.create(**arguments)

    created = await anyio.to_thread.run_sync(create)
    assert (created.model_extra or {})["signing_secret"].startswith("whsec_")
    tool = (await customer.api.get(f"/v1/tools/{created.id}")).json()["tool"]
    assert tool["parameters"] == arguments["parameters"]
    assert tool["endpoint_url"] == arguments["endpoint_url"]
