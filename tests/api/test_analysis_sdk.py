"""The official `phonic` SDK's calls of the work after a call (API.md sections 16 and 17),
unchanged, against the app in-process (httpx's ASGI transport) with the scripted chat
server as its language model: the module-scoped `parley serve` of tests/e2e has none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from phonic import AsyncPhonic
from tests.api.analysis_helpers import spoken
from tests.llm_server import ChatServer, json_round, running_chat_server
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.services import Context

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer) -> Settings:
    built: Settings = settings_factory(llm_base_url=chat.base_url, llm_model="m")
    return built


async def test_sdk_extraction_schemas_crud_and_extract_data(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    created = await sdk.extraction_schemas.create(
        project="main",
        name="Appointment details",
        prompt="Dates should be in `9 Apr 2025` format.",
        fields=[
            {"name": "Date", "type": "string", "description": "The date of the appointment"},
            {"name": "Confirmed as booked", "type": "bool", "description": None},
        ],
    )
    assert created.id.startswith("schema_")
    assert created.name == "Appointment details"
    listed = await sdk.extraction_schemas.list(project="main")
    assert [s.name for s in listed.extraction_schemas] == ["Appointment details"]
    got = (await sdk.extraction_schemas.get(created.id)).extraction_schema
    assert [(f.name, f.type) for f in got.fields] == [
        ("Date", "string"),
        ("Confirmed as booked", "bool"),
    ]
    assert (await sdk.extraction_schemas.update(created.id, prompt="New.")).success is True

    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.append(json_round({"Date": "9 Apr 2025", "Confirmed as booked": True}))
    extracted = await sdk.conversations.extract_data(conversation, schema_id=created.id)
    assert extracted.result == {"Date": "9 Apr 2025", "Confirmed as booked": True}
    (made,) = (await sdk.conversations.list_extractions(conversation)).extractions
    assert made.schema_.id == created.id
    assert made.schema_.is_deleted is False
    assert made.result == extracted.result

    assert (await sdk.extraction_schemas.delete(created.id)).success is True


async def test_sdk_eval_prompts_evaluate_and_list_evals(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt = await sdk.projects.create_eval_prompt(
        "main", name="test_prompt", prompt="The agent used the word chocolate."
    )
    assert prompt.id.startswith("evalp_")
    listed = await sdk.projects.list_eval_prompts("main")
    assert [p.name for p in listed.conversation_eval_prompts] == ["test_prompt"]

    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.append(json_round({"result": "unsuccessful"}))
    judged = await sdk.conversations.evaluate(conversation, prompt_id=prompt.id)
    assert judged.evaluation.result == "unsuccessful"
    (kept,) = (await sdk.conversations.list_evaluations(conversation)).evals
    assert (kept.result, kept.prompt.id, kept.prompt.name) == (
        "unsuccessful",
        prompt.id,
        "test_prompt",
    )
    (in_project,) = (await sdk.projects.list_evals("main")).evals
    assert (in_project.conversation_id, in_project.result) == (conversation, "unsuccessful")


async def test_sdk_get_analysis(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    analysis = (await sdk.conversations.get_analysis(conversation)).analysis
    assert (analysis.id, analysis.latencies_ms, analysis.interruptions_count) == (
        conversation,
        [],
        0,
    )
