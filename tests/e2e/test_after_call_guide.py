"""docs/after-the-call.md, run as written: its policy, schema, evaluation prompt, agent and
webhook (read from the guide's JSON blocks), a call made with its `talk.py` command, and the
`conversation.analysis` event it promises: the extracted fields, the verdict, the summary,
and the recording in the customer's bucket.

Real uvicorn on PostgreSQL, a real S3-protocol server checking signatures (moto), a real
webhook receiver checking the event's signature, and the OpenAI-protocol test server
scripted to answer the call, then the summary, the extraction and the evaluation.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import shlex
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from tests.e2e.conftest import Customer, Server
from tests.llm_server import ChatServer, Round, running_chat_server
from tests.s3_server import S3Server, read_presigned, running_s3
from tests.webhook_receiver import WebhookReceiver, running_receiver

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "after-the-call.md").read_text(encoding="utf-8")
TALK = ROOT / "examples" / "tools" / "talk.py"
EXTRACTED = {"date": "Friday", "party_size": 4, "callback_wanted": True}
SUMMARY = "The caller booked a table for four on Friday and asked to be called back."


def guide_json(path: str) -> dict[str, Any]:
    """The JSON body of the guide's `curl … $B{path} … <<'JSON'` block."""
    pattern = rf"curl [^\n]*\$B{re.escape(path)} [^\n]*<<'JSON'\n(.*?)\nJSON\n"
    (body,) = re.findall(pattern, GUIDE, re.DOTALL)
    value: dict[str, Any] = json.loads(body)
    return value


def guide_talk_arguments() -> list[str]:
    (command,) = re.findall(r"^python examples/tools/talk\.py (.*?[^\\])$", GUIDE, re.M | re.S)
    return shlex.split(command.replace("\\\n", " "))


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3() as server:
        yield server


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    """A language model; the bucket and the webhook receiver on loopback over http."""
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 10.0,
        "outbound_allow_http": True,
        "outbound_allow_private_networks": True,
    }


async def post(customer: Customer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await customer.api.post(path, json=body)
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


async def talk(server: Server, customer: Customer) -> str:
    """Run the guide's talk.py command; return the conversation's ID."""
    arguments = guide_talk_arguments()
    arguments[arguments.index("--key") + 1] = customer.api_key
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(TALK),
        "--url",
        server.http,
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 90)
    text = output.decode()
    assert process.returncode == 0, text
    frames = [json.loads(line[2:]) for line in text.splitlines() if line.startswith("← ")]
    conversation_id: str = frames[0]["conversation_id"]
    return conversation_id


async def analysis_event(receiver: WebhookReceiver, within: float) -> tuple[dict[str, Any], Any]:
    deadline = time.monotonic() + within
    while True:
        for request in receiver.requests:
            if request.json()["event_type"] == "conversation.analysis":
                return request.json(), request
        assert time.monotonic() < deadline, [r.json()["event_type"] for r in receiver.requests]
        await asyncio.sleep(0.1)


async def test_after_call_guide_analysis_event_has_the_fields_and_the_recording_in_the_bucket(
    server: Server,
    customer: Customer,
    chat: ChatServer,
    s3: S3Server,
    receiver: WebhookReceiver,
) -> None:
    policy = guide_json("/v1/external_storage_policies")
    assert policy["endpoint_url"].startswith("https://")
    policy |= {
        key: value
        for key, value in s3.policy().items()
        if key in ("endpoint_url", "bucket", "region", "access_key_id", "secret_access_key")
    }
    await post(customer, "/v1/external_storage_policies", policy)
    schema = guide_json("/v1/extraction_schemas")
    await post(customer, "/v1/extraction_schemas", schema)
    await post(
        customer,
        "/v1/projects/main/conversation_eval_prompts",
        guide_json("/v1/projects/main/conversation_eval_prompts"),
    )
    await post(customer, "/v1/agents", guide_json("/v1/agents"))
    hook = guide_json("/v1/webhooks") | {"url": receiver.url()}
    secret = (await post(customer, "/v1/webhooks", hook))["secret"]
    chat.script.rounds.extend(
        [
            Round(text=["Four on Friday, booked. ", "We will call you back to confirm."]),
            Round(text=[SUMMARY]),
            Round(text=[json.dumps(EXTRACTED)]),
            Round(text=[json.dumps({"result": "successful"})]),
        ]
    )

    conversation_id = await talk(server, customer)
    event, request = await analysis_event(receiver, within=60)

    Webhook(secret).verify(request.body, request.headers)  # signed as docs/webhooks.md says
    data = event["data"]
    conversation = data["conversation"]
    assert conversation["id"] == conversation_id
    assert conversation["summary"] == SUMMARY
    [extraction] = data["extractions"]
    assert extraction["schema"]["name"] == "Booking details"
    assert extraction["result"] == EXTRACTED
    [evaluation] = data["evaluations"]
    assert (evaluation["prompt"]["name"], evaluation["result"]) == (
        "Booking confirmed",
        "successful",
    )
    asked = chat.requests[2].body  # the extraction's request: constrained by the schema
    assert asked["response_format"]["type"] == "json_schema"
    constrained = asked["response_format"]["json_schema"]["schema"]
    assert sorted(constrained["properties"]) == sorted(f["name"] for f in schema["fields"])
    assert "A table for four on Friday" in json.dumps(asked["messages"])

    key = f"{policy['key_prefix']}{conversation_id}.wav"
    assert key in s3.keys()
    got = read_presigned(conversation["audio_url"])
    assert got.status_code == 200
    assert got.content == s3.read(key)
    with wave.open(io.BytesIO(got.content)) as recording:
        assert (recording.getnchannels(), recording.getsampwidth()) == (2, 2)
        assert recording.getnframes() / recording.getframerate() > 1.0  # welcome and answer
