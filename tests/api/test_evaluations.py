"""Evaluation prompts and evaluations over REST (API.md section 16) against the scripted chat
server, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.api.analysis_helpers import create_prompt, spoken
from tests.api.helpers import assert_error
from tests.llm_server import ChatServer, json_round, running_chat_server
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.services import Context

pytestmark = pytest.mark.anyio
PROMPTS = "/v1/projects/main/conversation_eval_prompts"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer) -> Settings:
    built: Settings = settings_factory(
        llm_base_url=chat.base_url, llm_model="judge", llm_timeout_seconds=1
    )
    return built


async def judged(tenant: Tenant, ctx: Context, make_agent: MakeAgent) -> tuple[dict[str, Any], str]:
    """A prompt and a spoken, ended conversation: (the prompt, conversation ID)."""
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant)
    return prompt, await spoken(ctx, tenant.org.id, agent["name"])


async def evaluate(tenant: Tenant, conversation: str, prompt_id: str) -> Any:
    return await tenant.client.post(
        f"/v1/conversations/{conversation}/evals", json={"prompt_id": prompt_id}
    )


# --- prompts ---------------------------------------------------------------------------


async def test_eval_prompt_create_answers_id_name_prompt_and_is_listed(tenant: Tenant) -> None:
    created = await create_prompt(tenant)
    assert set(created) == {"id", "name", "prompt"}
    assert created["id"].startswith("evalp_")
    assert created["prompt"] == "The agent said chocolate."
    listed = (await tenant.client.get(PROMPTS)).json()
    assert listed == {"conversation_eval_prompts": [created], "next_cursor": None}
    project = (await tenant.client.get("/v1/projects/main")).json()["project"]
    by_id = await tenant.client.get(f"/v1/projects/{project['id']}/conversation_eval_prompts")
    assert by_id.json() == listed


async def test_eval_prompt_name_taken_409(tenant: Tenant) -> None:
    await create_prompt(tenant)
    response = await tenant.client.post(PROMPTS, json={"name": "used_chocolate", "prompt": "x"})
    assert_error(response, 409, "name_taken")


@pytest.mark.parametrize(
    "body",
    [{"name": "", "prompt": "x"}, {"name": "ok", "prompt": ""}, {"name": "a/b", "prompt": "x"}],
    ids=["empty-name", "empty-prompt", "slash-in-name"],
)
async def test_eval_prompt_invalid_400(tenant: Tenant, body: dict[str, str]) -> None:
    assert_error(await tenant.client.post(PROMPTS, json=body), 400, "validation_error")


async def test_eval_prompt_unknown_project_404(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/projects/nope/conversation_eval_prompts", json={"name": "n", "prompt": "p"}
    )
    assert_error(response, 404, "project_not_found")
    assert_error(
        await tenant.client.get("/v1/projects/nope/conversation_evals"), 404, "project_not_found"
    )


# --- evaluations ---------------------------------------------------------------------------


async def test_evaluation_verdict_stored_and_listed(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round({"result": "successful"}))
    response = await evaluate(tenant, conversation, prompt["id"])
    assert response.status_code == 200, response.text
    made = response.json()["evaluation"]
    assert made["id"].startswith("eval_")
    assert made["result"] == "successful"
    assert made["prompt"] == {"id": prompt["id"], "name": "used_chocolate"}
    assert made["conversation_id"] == conversation
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/evals")).json()
    assert listed == {"evals": [made], "next_cursor": None}
    in_project = (await tenant.client.get("/v1/projects/main/conversation_evals")).json()
    assert in_project == {"evals": [made], "next_cursor": None}


async def test_evaluation_request_carries_the_enum_schema_criterion_and_transcript(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round({"result": "unsuccessful"}))
    await evaluate(tenant, conversation, prompt["id"])
    (sent,) = chat.requests
    wanted = sent.body["response_format"]["json_schema"]
    assert wanted["strict"] is True
    assert wanted["schema"] == {
        "type": "object",
        "properties": {
            "result": {"type": "string", "enum": ["successful", "unsuccessful", "undecided"]}
        },
        "required": ["result"],
        "additionalProperties": False,
    }
    system, user = sent.body["messages"]
    assert "Criterion: The agent said chocolate." in system["content"]
    assert user["content"].startswith("Transcript:\n\nUser: Hi, a table for four")


async def test_evaluation_bad_answer_then_good_one_retry(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    chat.script.rounds.extend(
        [json_round({"result": "great"}), json_round({"result": "undecided"})]
    )
    made = (await evaluate(tenant, conversation, prompt["id"])).json()["evaluation"]
    assert made["result"] == "undecided"
    assert len(chat.requests) == 2


async def test_evaluation_bad_answer_twice_result_error_stored(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    chat.script.rounds.extend([json_round("maybe?"), json_round({"verdict": "successful"})])
    response = await evaluate(tenant, conversation, prompt["id"])
    assert response.status_code == 200, response.text
    assert response.json()["evaluation"]["result"] == "error"
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/evals")).json()
    assert [e["result"] for e in listed["evals"]] == ["error"]


async def test_evaluation_model_silent_503_nothing_stored(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    chat.script.delay_s = 5.0  # past three times the 1 s setting (a whole answer's time)
    assert_error(await evaluate(tenant, conversation, prompt["id"]), 503, "service_unavailable")
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/evals")).json()
    assert listed["evals"] == []


async def test_evaluation_prompt_by_name_unknown_404_foreign_403(
    tenant: Tenant, other_tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    _, conversation = await judged(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round({"result": "successful"}))
    by_name = await evaluate(tenant, conversation, "used_chocolate")
    assert by_name.json()["evaluation"]["prompt"]["name"] == "used_chocolate"
    assert_error(await evaluate(tenant, conversation, "nope"), 404, "eval_prompt_not_found")
    foreign = await create_prompt(other_tenant)
    assert_error(await evaluate(tenant, conversation, foreign["id"]), 403, "forbidden")


async def test_evaluation_kept_when_the_transcript_is_deleted(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    chat.script.rounds.append(json_round({"result": "successful"}))
    await evaluate(tenant, conversation, prompt["id"])
    await tenant.client.delete(f"/v1/conversations/{conversation}")
    listed = (await tenant.client.get(f"/v1/conversations/{conversation}/evals")).json()
    assert [e["result"] for e in listed["evals"]] == ["successful"]
    assert_error(await evaluate(tenant, conversation, prompt["id"]), 409, "no_transcript")


async def test_project_evaluations_only_those_of_its_prompts(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    prompt, conversation = await judged(tenant, ctx, make_agent)
    await tenant.client.post("/v1/projects", json={"name": "other"})
    chat.script.rounds.append(json_round({"result": "successful"}))
    await evaluate(tenant, conversation, prompt["id"])
    other = (await tenant.client.get("/v1/projects/other/conversation_evals")).json()
    assert other == {"evals": [], "next_cursor": None}
