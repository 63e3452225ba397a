"""Every method of the official `phonic` SDK, called through the SDK against a real
`parley serve`, and the table of what Parley does with each (API.md section 17, issue #41).

The methods are found by introspecting the SDK's client, so a method a new SDK release
adds cannot hide: `test_sdk_every_method_has_a_driver` fails until it is driven here. Each
driver calls its method with a realistic request and checks the parsed answer; the harness
also checks the raw JSON of every answer against the method's declared return type
(`tests/sdk_shapes.py`: every member the type requires is there, of its kind), because the
SDK's lenient models would parse an empty object. The four SIP calls must answer 501
`not_supported`.

`test_sdk_compatibility_table` renders docs/sdk-compatibility.md from what the calls did
and fails when the committed page differs; run it with PARLEY_WRITE_SDK_TABLE=1 to rewrite
the page.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
import os
import re
import subprocess
import sys
import time
import typing
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from phonic import (
    AssistantFinishedSpeakingPayload,
    ConfigPayload,
    ConversationCreatedPayload,
    GenerateReplyPayload,
    Phonic,
    ReadyToStartConversationPayload,
)
from phonic.core.api_error import ApiError
from phonic.core.request_options import RequestOptions
from phonic.environment import PhonicEnvironment

from tests.faults.serve_process import ServeProcess
from tests.llm_server import ChatServer, Round, json_round, running_chat_server
from tests.sdk_shapes import shape_errors

pytestmark = [
    pytest.mark.e2e,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "sdk-compatibility.md"
SWITCHING = ROOT / "docs" / "switching.md"
SWITCH = ROOT / "examples" / "sdk" / "switch.py"
MAX_MESSAGES = 400
NOT_METHODS = {"with_raw_response"}
ID_SEGMENT = re.compile(r"^[a-z]+_[0-9a-f]{32}$")


def sdk_methods(client: Phonic) -> list[str]:
    """`resource.method` for every public method of every resource of the SDK's client."""
    names = []
    for resource_name in dir(client):
        resource = getattr(client, resource_name)
        if resource_name.startswith("_") or callable(resource):
            continue
        for method_name in dir(resource):
            if method_name.startswith("_") or method_name in NOT_METHODS:
                continue
            if callable(getattr(resource, method_name)):
                names.append(f"{resource_name}.{method_name}")
    return sorted(names)


@dataclass
class World:
    """What the drivers share: the client, the server, the model and what was made."""

    client: Phonic
    serve: ServeProcess
    chat: ChatServer
    exchanges: list[httpx.Response] = field(default_factory=list)
    made: dict[str, str] = field(default_factory=dict)

    def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A request outside the SDK (setup the SDK has no call for), with the same key."""
        headers = {"Authorization": f"Bearer {self.serve.first_key}"}
        return httpx.request(
            method, f"{self.serve.http}{path}", headers=headers, timeout=10, **kwargs
        )


ONCE: RequestOptions = {"max_retries": 0}
"""For the calls whose expected answer is a 5xx: the SDK retries those twice by default,
with a back-off of seconds, and would only ask the same again."""


@dataclass(frozen=True)
class Driver:
    """How one SDK method is called here, and what Parley does with it (the table's words)."""

    call: Callable[[World], object]
    does: str
    refused: str | None = None
    """The error code the call must answer instead (the SIP calls), or None: it must work."""


def next_of(socket: Any, kind: type) -> Any:
    for _, message in zip(range(MAX_MESSAGES), socket, strict=False):
        if isinstance(message, kind):
            return message
    raise AssertionError(f"no {kind.__name__}")


def voice_id(w: World) -> str:
    """An installed voice (read outside the SDK: the harness checks a driver's first call)."""
    voice: str = w.raw("GET", "/v1/voices").json()["voices"][0]["id"]
    return voice


def main_project_id(w: World) -> str:
    project: str = w.raw("GET", "/v1/projects/main").json()["project"]["id"]
    return project


# --- the drivers, in the order they run ------------------------------------------------


def workspace_get(w: World) -> object:
    workspace = w.client.workspace.get()
    assert isinstance(workspace.ip_allowlist, list)
    return workspace


def workspace_update(w: World) -> object:
    answer = w.client.workspace.update(invite_link_allowed_domains=["example.com"])
    assert answer.success is True
    assert w.client.workspace.get().invite_link_allowed_domains == ["example.com"]
    return answer


def projects_create(w: World) -> object:
    made = w.client.projects.create(name="compat")
    assert made.name == "compat"
    assert made.id.startswith("proj_")
    w.made["project"] = made.id
    return made


def projects_list(w: World) -> object:
    listed = w.client.projects.list()
    assert {p.name for p in listed.projects} >= {"main", "compat"}
    return listed


def projects_get(w: World) -> object:
    got = w.client.projects.get("compat")
    assert got.project.id == w.made["project"]
    return got


def projects_update(w: World) -> object:
    answer = w.client.projects.update("compat", max_active_conversations=50)
    assert answer.success is True
    assert w.client.projects.get("compat").project.max_active_conversations == 50
    return answer


def api_keys_create(w: World) -> object:
    made = w.client.api_keys.create(name="compat")
    assert made.id.startswith("key_")
    assert made.name == "compat"
    assert made.api_key.startswith("parley_sk_")
    w.made["api_key"] = made.id
    return made


def api_keys_update(w: World) -> object:
    answer = w.client.api_keys.update(w.made["api_key"], name="compat-renamed")
    assert answer.success is True
    return answer


def api_keys_rotate(w: World) -> object:
    rotated = w.client.api_keys.rotate(w.made["api_key"])
    assert rotated.id == w.made["api_key"]
    assert rotated.api_key.startswith("parley_sk_")
    return rotated


def api_keys_delete(w: World) -> object:
    answer = w.client.api_keys.delete(w.made["api_key"])
    assert answer.success is True
    return answer


def voices_list(w: World) -> object:
    listed = w.client.voices.list()
    assert listed.voices
    return listed


def voices_get(w: World) -> object:
    voice = w.made["voice"] = voice_id(w)
    got = w.client.voices.get(voice)
    assert got.voice.id == voice
    assert httpx.get(got.voice.audio_url, timeout=10).content[:4] == b"RIFF"
    return got


def voices_preview(w: World) -> object:
    voice = voice_id(w)
    preview = w.client.voices.preview(text="Hello there.", voice_id=voice)
    with wave.open(io.BytesIO(base64.b64decode(preview.audio))) as audio:
        assert audio.getnframes() > 0
    return preview


def tts_stream(w: World) -> object:
    voice = voice_id(w)
    audio = b"".join(w.client.tts.stream(text="Hello there. How are you?", voice_id=voice))
    assert len(audio) > 16_000  # at least half a second of 16 kHz 16-bit speech
    return None


def tools_create(w: World) -> object:
    made = w.client.tools.create(
        name="compat_weather",
        description="Looks up the weather.",
        type="custom_webhook",
        execution_mode="sync",
        endpoint_url="https://tools.example.com/weather",
        parameters=[{"type": "string", "name": "city", "description": "City", "is_required": True}],
    )
    assert made.id.startswith("tool_")
    return made


def tools_list(w: World) -> object:
    listed = w.client.tools.list()
    assert "compat_weather" in {t.name for t in listed.tools}
    return listed


def tools_get(w: World) -> object:
    return w.client.tools.get("compat_weather")


def tools_update(w: World) -> object:
    answer = w.client.tools.update("compat_weather", description="The weather, now.")
    assert answer.success is True
    return answer


def extraction_schemas_create(w: World) -> object:
    made = w.client.extraction_schemas.create(
        name="Compat booking",
        prompt="What was booked.",
        fields=[{"name": "Date", "type": "string", "description": "The date"}],
    )
    w.made["schema"] = made.id
    return made


def extraction_schemas_list(w: World) -> object:
    return w.client.extraction_schemas.list()


def extraction_schemas_get(w: World) -> object:
    return w.client.extraction_schemas.get(w.made["schema"])


def extraction_schemas_update(w: World) -> object:
    return w.client.extraction_schemas.update(w.made["schema"], prompt="What was booked, when.")


def projects_create_eval_prompt(w: World) -> object:
    main = main_project_id(w)
    made = w.client.projects.create_eval_prompt(
        main, name="compat_polite", prompt="Was the agent polite?"
    )
    w.made["eval_prompt"] = made.id
    return made


def projects_list_eval_prompts(w: World) -> object:
    main = main_project_id(w)
    listed = w.client.projects.list_eval_prompts(main)
    assert w.made["eval_prompt"] in {p.id for p in listed.conversation_eval_prompts}
    return listed


def storage_create(w: World) -> object:
    made = w.client.external_storage_policies.create(
        name="compat_bucket",
        endpoint_url="https://s3.example.com",
        bucket="compat-recordings",
        access_key_id="AKIAEXAMPLE",
        secret_access_key="secret-example",
    )
    w.made["storage"] = made.id
    return made


def storage_list(w: World) -> object:
    return w.client.external_storage_policies.list()


def storage_get(w: World) -> object:
    return w.client.external_storage_policies.get(w.made["storage"])


def storage_update(w: World) -> object:
    return w.client.external_storage_policies.update(w.made["storage"], region="eu-west-1")


def agents_create(w: World) -> object:
    made = w.client.agents.create(
        name="compat-agent",
        system_prompt="You book tables.",
        welcome_message="Hello, this is the bistro.",
        tools=["compat_weather"],
    )
    assert made.name == "compat-agent"
    w.made["agent"] = made.id
    return made


def agents_list(w: World) -> object:
    listed = w.client.agents.list()
    assert "compat-agent" in {a.name for a in listed.agents}
    return listed


def agents_get(w: World) -> object:
    got = w.client.agents.get("compat-agent")
    assert got.agent.id == w.made["agent"]
    return got


def agents_update(w: World) -> object:
    answer = w.client.agents.update("compat-agent", system_prompt="You book tables politely.")
    assert answer.success is True
    return answer


def agents_upsert(w: World) -> object:
    first = w.client.agents.upsert(name="compat-upserted", system_prompt="One.")
    assert (first.inserted, first.updated) == (True, False)
    second = w.client.agents.upsert(name="compat-upserted", system_prompt="Two.")
    assert (second.inserted, second.updated) == (False, True)
    return second


def agents_disable(w: World) -> object:
    return w.client.agents.disable("compat-upserted")


def agents_enable(w: World) -> object:
    return w.client.agents.enable("compat-upserted")


def add_custom_phone_number(w: World) -> object:
    return w.client.agents.add_custom_phone_number(
        "compat-agent",
        phone_number="+14155550100",
        sip_address="sip:pbx.example.com",
        sip_auth_username="user",
        sip_auth_password="password",
        request_options=ONCE,
    )


def delete_custom_phone_number(w: World) -> object:
    return w.client.agents.delete_custom_phone_number(
        "compat-agent", phone_number="+14155550100", request_options=ONCE
    )


def update_phone_number(w: World) -> object:
    return w.client.agents.update_phone_number(
        "compat-agent", phone_number="+14155550100", request_options=ONCE
    )


def auth_session_token(w: World) -> object:
    made = w.client.auth.create_session_token(ttl_seconds=60)
    assert made.session_token.startswith("parley_st_")
    return made


def auth_conversation_token(w: World) -> object:
    made = w.client.auth.create_conversation_token(agent_id=w.made["agent"], ttl_seconds=30)
    assert made.conversation_token.startswith("parley_ct_")
    return made


def conversations_connect(w: World) -> object:
    w.chat.script.rounds.append(Round(text=["Your table for two is booked."]))
    with w.client.conversations.connect() as socket:
        socket.send_config(
            ConfigPayload(agent="compat-agent", input_format="pcm_16000", output_format="pcm_16000")
        )
        created = next_of(socket, ConversationCreatedPayload)
        next_of(socket, ReadyToStartConversationPayload)
        socket.send_generate_reply(GenerateReplyPayload(user_message="A table for two, please."))
        next_of(socket, AssistantFinishedSpeakingPayload)
    w.made["conversation"] = created.conversation_id
    path = f"/v1/conversations/{created.conversation_id}"
    for _ in range(100):  # the server ends it once it sees the socket close
        if w.raw("GET", path).json()["conversation"]["status"] == "ended":
            return None
        time.sleep(0.05)
    raise AssertionError("the conversation did not end after its socket closed")


def conversations_list(w: World) -> object:
    listed = w.client.conversations.list(limit=10, duration_min=0)
    assert w.made["conversation"] in {c.id for c in listed.conversations}  # type: ignore[union-attr]
    return listed


def conversations_get(w: World) -> object:
    got = w.client.conversations.get(w.made["conversation"])
    items = got.conversation.items
    assistant = [item for item in items if item.role == "assistant"]
    assert assistant
    w.made["item"] = assistant[-1].id
    return got


def conversations_get_analysis(w: World) -> object:
    return w.client.conversations.get_analysis(w.made["conversation"])


def conversations_evaluate(w: World) -> object:
    w.chat.script.rounds.append(json_round({"result": "successful"}))
    return w.client.conversations.evaluate(w.made["conversation"], prompt_id=w.made["eval_prompt"])


def conversations_list_evaluations(w: World) -> object:
    return w.client.conversations.list_evaluations(w.made["conversation"])


def projects_list_evals(w: World) -> object:
    main = main_project_id(w)
    return w.client.projects.list_evals(main)


def conversations_extract_data(w: World) -> object:
    w.chat.script.rounds.append(json_round({"Date": "9 Apr 2025"}))
    extracted = w.client.conversations.extract_data(
        w.made["conversation"], schema_id=w.made["schema"]
    )
    assert extracted.result == {"Date": "9 Apr 2025"}
    return extracted


def conversations_list_extractions(w: World) -> object:
    return w.client.conversations.list_extractions(w.made["conversation"])


def conversation_items_replay(w: World) -> object:
    w.chat.script.rounds.append(Round(text=["A table for two at eight."]))
    replayed = w.client.conversation_items.replay(w.made["item"], num_responses=1)
    assert replayed.responses
    return replayed


def responses_create(w: World) -> object:
    w.chat.script.rounds.append(Round(text=["We open at noon."]))
    answered = w.client.responses.create(
        system_prompt="You book tables.",
        input=[{"role": "user", "text": "When do you open?"}],
        num_responses=1,
    )
    assert answered.responses
    return answered


def conversations_replay(w: World) -> object:
    replayed = w.client.conversations.replay(w.made["conversation"])
    assert replayed.message
    return replayed


def outbound_call(w: World) -> object:
    account = {"account_sid": "AC" + "1" * 32, "auth_token": "2" * 32}
    assert w.raw("PUT", "/v1/telephony/twilio", json=account).status_code == 200
    numbers = {"phone_numbers": ["+14155550177"]}
    assert w.raw("PATCH", "/v1/agents/compat-agent", json=numbers).status_code == 200
    return w.client.conversations.outbound_call(
        to_phone_number="+14155550111", config={"agent": "compat-agent"}, dry_run=True
    )


def conversations_cancel(w: World) -> object:
    pending = w.raw("POST", "/v1/conversations", json={"agent": "compat-agent"}).json()
    w.made["pending"] = pending["conversation"]["id"]
    answer = w.client.conversations.cancel(w.made["pending"])
    assert answer.success is True
    return answer


def sip_outbound_call(w: World) -> object:
    return w.client.conversations.sip_outbound_call(
        sip_address="sip:pbx.example.com",
        from_phone_number="+14155550177",
        to_phone_number="+14155550111",
        request_options=ONCE,
    )


def conversations_delete(w: World) -> object:
    return w.client.conversations.delete(w.made["pending"])


def tools_delete(w: World) -> object:
    assert w.raw("PATCH", "/v1/agents/compat-agent", json={"tools": []}).status_code == 200
    return w.client.tools.delete("compat_weather")


def extraction_schemas_delete(w: World) -> object:
    return w.client.extraction_schemas.delete(w.made["schema"])


def storage_delete(w: World) -> object:
    return w.client.external_storage_policies.delete(w.made["storage"])


def agents_delete(w: World) -> object:
    return w.client.agents.delete("compat-upserted")


def projects_delete(w: World) -> object:
    return w.client.projects.delete("compat")


SIP = "needs a SIP trunk, which Parley does not have; the message names the Twilio route to use"

DRIVERS: dict[str, Driver] = {
    "workspace.get": Driver(workspace_get, "the organization, its caps and its `ip_allowlist`"),
    "workspace.update": Driver(
        workspace_update, "name, caps, `ip_allowlist` (refused if it locks the caller out)"
    ),
    "projects.create": Driver(projects_create, "creates a project"),
    "projects.list": Driver(projects_list, "lists projects, with active conversations"),
    "projects.get": Driver(projects_get, "one project, by name or ID"),
    "projects.update": Driver(projects_update, "name, `default_agent`, cap"),
    "api_keys.create": Driver(api_keys_create, "a key, its secret shown once"),
    "api_keys.update": Driver(api_keys_update, "renames a key"),
    "api_keys.rotate": Driver(
        api_keys_rotate, "a new secret; the old one stops (or after a grace)"
    ),
    "api_keys.delete": Driver(api_keys_delete, "revokes a key on every instance at once"),
    "voices.list": Driver(voices_list, "the installed voices"),
    "voices.get": Driver(voices_get, "one voice, with a sample served by Parley"),
    "voices.preview": Driver(voices_preview, "the text spoken, as a base64 WAV"),
    "tts.stream": Driver(tts_stream, "the text spoken, streamed as it is synthesized"),
    "tools.create": Driver(tools_create, "webhook, socket and built-in tools"),
    "tools.list": Driver(tools_list, "a project's tools"),
    "tools.get": Driver(tools_get, "one tool"),
    "tools.update": Driver(tools_update, "changes a tool"),
    "extraction_schemas.create": Driver(extraction_schemas_create, "a schema for extraction"),
    "extraction_schemas.list": Driver(extraction_schemas_list, "a project's schemas"),
    "extraction_schemas.get": Driver(extraction_schemas_get, "one schema"),
    "extraction_schemas.update": Driver(extraction_schemas_update, "changes a schema"),
    "projects.create_eval_prompt": Driver(projects_create_eval_prompt, "an evaluation prompt"),
    "projects.list_eval_prompts": Driver(projects_list_eval_prompts, "a project's prompts"),
    "external_storage_policies.create": Driver(storage_create, "a bucket for recordings"),
    "external_storage_policies.list": Driver(storage_list, "a project's policies"),
    "external_storage_policies.get": Driver(storage_get, "one policy, keys never shown"),
    "external_storage_policies.update": Driver(storage_update, "changes a policy"),
    "agents.create": Driver(agents_create, "creates an agent; SDK members it lacks are 400"),
    "agents.list": Driver(agents_list, "a project's agents"),
    "agents.get": Driver(agents_get, "one agent"),
    "agents.update": Driver(agents_update, "changes an agent (refused while disabled)"),
    "agents.upsert": Driver(agents_upsert, "creates or replaces an agent by name"),
    "agents.disable": Driver(agents_disable, "disables an agent (the spec's disable)"),
    "agents.enable": Driver(agents_enable, "enables it again"),
    "agents.add_custom_phone_number": Driver(add_custom_phone_number, SIP, "not_supported"),
    "agents.delete_custom_phone_number": Driver(delete_custom_phone_number, SIP, "not_supported"),
    "agents.update_phone_number": Driver(update_phone_number, SIP, "not_supported"),
    "auth.create_session_token": Driver(auth_session_token, "a revocable session token"),
    "auth.create_conversation_token": Driver(
        auth_conversation_token, "a single-use token for one conversation with one agent"
    ),
    "conversations.connect": Driver(conversations_connect, "the conversation socket"),
    "conversations.list": Driver(conversations_list, "conversations, with the SDK's filters"),
    "conversations.get": Driver(conversations_get, "one conversation with its items"),
    "conversations.get_analysis": Driver(conversations_get_analysis, "latencies, interruptions"),
    "conversations.evaluate": Driver(conversations_evaluate, "an evaluation by the model"),
    "conversations.list_evaluations": Driver(conversations_list_evaluations, "its evaluations"),
    "projects.list_evals": Driver(projects_list_evals, "a project's evaluations"),
    "conversations.extract_data": Driver(conversations_extract_data, "an extraction by the model"),
    "conversations.list_extractions": Driver(conversations_list_extractions, "its extractions"),
    "conversation_items.replay": Driver(
        conversation_items_replay, "the model asked again for one reply; no tool is run"
    ),
    "responses.create": Driver(responses_create, "the model's replies to a given history"),
    "conversations.replay": Driver(
        conversations_replay, "the recorded caller played into a new conversation"
    ),
    "conversations.outbound_call": Driver(outbound_call, "a call placed through Twilio"),
    "conversations.cancel": Driver(conversations_cancel, "ends it; a call is hung up"),
    "conversations.sip_outbound_call": Driver(sip_outbound_call, SIP, "not_supported"),
    "conversations.delete": Driver(conversations_delete, "deletes transcript and recording"),
    "tools.delete": Driver(tools_delete, "deletes a tool no agent names"),
    "extraction_schemas.delete": Driver(extraction_schemas_delete, "deletes a schema"),
    "external_storage_policies.delete": Driver(storage_delete, "deletes a policy no agent names"),
    "agents.delete": Driver(agents_delete, "deletes an agent"),
    "projects.delete": Driver(projects_delete, "deletes an empty project"),
}


# --- the harness -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    method: str
    routes: tuple[str, ...]
    result: str
    problems: tuple[str, ...]


def route_of(request: httpx.Request, names: set[str], ids: set[str]) -> str:
    """The request's method and path, IDs and the drivers' names made placeholders."""
    segments = request.url.path.split("/")
    shown = [
        "{id}" if ID_SEGMENT.match(s) or s in ids else "{nameOrId}" if s in names else s
        for s in segments
    ]
    return f"{request.method} {'/'.join(shown)}"


def declared_answer(client: Phonic, method: str) -> Any:
    resource, name = method.split(".")
    return typing.get_type_hints(getattr(getattr(client, resource), name)).get("return")


def run_driver(world: World, method: str, driver: Driver, names: set[str]) -> Outcome:
    start = len(world.exchanges)
    problems: list[str] = []
    try:
        driver.call(world)
    except ApiError as error:
        body = error.body if isinstance(error.body, dict) else {}
        code = body.get("error", {}).get("code") if isinstance(body.get("error"), dict) else None
        if driver.refused is None or code != driver.refused or error.status_code != 501:
            problems.append(f"answered {error.status_code} {error.body!r}")
    except Exception as error:  # every failure is reported, not the first
        problems.append(f"{type(error).__name__}: {error}")
    else:
        if driver.refused is not None:
            problems.append(f"worked where {driver.refused} was expected")
    own = world.exchanges[start:]
    first = own[0] if own else None  # the method's own call: a driver reads back after it
    ids = set(world.made.values())
    routes = (route_of(first.request, names, ids),) if first is not None else ()
    answer = declared_answer(world.client, method)
    if not problems and driver.refused is None and answer is not None and first is not None:
        if first.headers.get("content-type", "").startswith("application/json"):
            problems.extend(shape_errors(answer, json.loads(first.content)))
    result = ("501 `not_supported`" if driver.refused else "works") if not problems else "FAILS"
    return Outcome(method, routes, result, tuple(problems))


def render(outcomes: list[Outcome]) -> str:
    lines = [
        "# The official SDK against Parley",
        "",
        "Every method of the official `phonic` Python SDK (0.32.42), called through the SDK",
        "against a real `parley serve` by `tests/e2e/test_sdk_compatibility.py`, which writes",
        "this page (`PARLEY_WRITE_SDK_TABLE=1`) and fails when it differs from what the calls",
        'did. "works" means the call answered as the SDK\'s type says: every member the type',
        "requires present and of its kind (a `null` where Parley has no value). The route is the",
        "one the SDK called. [Switching from the hosted service](switching.md)",
        "says what else to know.",
        "",
        "| SDK method | HTTP | result | what Parley does |",
        "|---|---|---|---|",
    ]
    does = {name: driver.does for name, driver in DRIVERS.items()}
    for outcome in sorted(outcomes, key=lambda o: o.method):
        routes = "".join(f"`{r}`" for r in outcome.routes) or "`GET /v1/sts/ws` (WebSocket)"
        lines.append(
            f"| `{outcome.method}` | {routes} | {outcome.result} | {does[outcome.method]} |"
        )
    working = sum(o.result == "works" for o in outcomes)
    refused = sum(o.result.startswith("501") for o in outcomes)
    lines += ["", f"{len(outcomes)} methods: {working} work, {refused} answer 501 (SIP)."]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[World]:
    process = ServeProcess(
        tmp_path_factory.mktemp("sdk-compat"),
        PARLEY_LLM_BASE_URL=chat.base_url,
        PARLEY_LLM_MODEL="bistro-7b",
    )
    try:
        process.start()
        assert process.first_key is not None
        exchanges: list[httpx.Response] = []

        def keep(response: httpx.Response) -> None:
            if "stream" not in response.request.url.path:
                response.read()
            exchanges.append(response)

        environment = PhonicEnvironment(base=f"{process.http}/v1", production=process.ws)
        with httpx.Client(timeout=20, event_hooks={"response": [keep]}) as http:
            client = Phonic(api_key=process.first_key, environment=environment, httpx_client=http)
            yield World(client=client, serve=process, chat=chat, exchanges=exchanges)
    finally:
        process.ensure_stopped()


def test_sdk_every_method_has_a_driver(world: World) -> None:
    assert sdk_methods(world.client) == sorted(DRIVERS)
    assert len(DRIVERS) == 61


def test_sdk_every_driver_calls_its_own_method() -> None:
    for name, driver in DRIVERS.items():
        assert f"client.{name}(" in inspect.getsource(driver.call), name


def test_sdk_compatibility_table(world: World) -> None:
    names = {"compat", "compat-agent", "compat-upserted", "compat_weather", "main"}
    outcomes = [run_driver(world, method, driver, names) for method, driver in DRIVERS.items()]
    failing = {o.method: o.problems for o in outcomes if o.problems}
    assert not failing, "\n".join(f"{m}: {'; '.join(p)}" for m, p in failing.items())
    page = render(outcomes)
    if os.environ.get("PARLEY_WRITE_SDK_TABLE") == "1":
        TABLE.write_text(page, encoding="utf-8")
    assert TABLE.read_text(encoding="utf-8") == page, (
        "docs/sdk-compatibility.md is stale: rerun with PARLEY_WRITE_SDK_TABLE=1"
    )


def test_switching_guide_example_runs_against_parley(world: World) -> None:
    """docs/switching.md's program, run as written with only its two variables set. (The
    model's words are not asserted: a replay of the table test may still be talking to the
    same scripted model in the background.)"""
    env = {
        **os.environ,
        "PARLEY_URL": world.serve.http,
        "PARLEY_API_KEY": world.serve.first_key or "",
    }
    finished = subprocess.run(  # noqa: S603 - this interpreter, a file of this repository
        [sys.executable, str(SWITCH)], env=env, capture_output=True, text=True, timeout=60
    )
    assert finished.returncode == 0, finished.stderr
    welcome, question, answer = finished.stdout.splitlines()
    assert (welcome, question) == (
        "assistant: Hello, this is the Bistro.",
        "user: When do you open?",
    )
    assert answer.startswith("assistant: ")
    assert len(answer) > len("assistant: ")
    assert "examples/sdk/switch.py" in SWITCHING.read_text(encoding="utf-8")
