"""A conversation's page after the call (API.md section 16, issue #40): the recording by its
signed URL (and the page's policy letting it load), why there is none, the summary, the
redaction tags marked and everything else escaped, the extractions and evaluations, and the
forms that run one on demand against the scripted chat server, with their refusals."""

from __future__ import annotations

import html
import io
import re
import wave
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI

from parley.config import Settings
from parley.services import Context, recordings, summaries
from parley.web.render import redaction_marks
from tests.api.analysis_helpers import APPOINTMENT, create_prompt, create_schema, spoken, tenant_of
from tests.llm_server import ChatServer, Round, json_round, running_chat_server
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, csrf_of, form_values, text_of

pytestmark = pytest.mark.anyio

PUBLIC_URL = "http://127.0.0.1:8000"
GOOD = {"Date": "9 Apr 2025", "Guests": 4, "Copay": 12.5, "Confirmed as booked": True}
AUDIO = re.compile(r'<audio controls preload="none" src="([^"]+)"')


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer, tmp_path: Path) -> Settings:
    built: Settings = settings_factory(
        public_url=PUBLIC_URL,
        recordings_dir=tmp_path / "recordings",
        llm_base_url=chat.base_url,
        llm_model="extractor",
        llm_timeout_seconds=10,  # no test here waits on a silent model; a loaded one is slow
    )
    return built


def wav_bytes(seconds: float = 0.25, rate: int = 8000) -> bytes:
    """A silent stereo 16-bit WAV, as recordings are."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as file:
        file.setnchannels(2)
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes(b"\0\0\0\0" * int(rate * seconds))
    return buffer.getvalue()


async def recorded(ctx: Context, tenant: Tenant, agent: str) -> str:
    """A spoken, ended conversation whose recording is kept."""
    conversation = await spoken(ctx, tenant.org.id, agent)

    async def render() -> bytes:
        return wav_bytes()

    assert await recordings.keep(
        ctx, org_id=tenant.org.id, conversation_id=conversation, render=render
    )
    return conversation


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def page_of(browser: Browser, conversation: str) -> httpx.Response:
    response = await browser.http.get(f"/dashboard/conversations/{conversation}")
    assert response.status_code == 200, response.text
    return response


@asynccontextmanager
async def browser_on(app: FastAPI) -> AsyncIterator[Browser]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield Browser(http)


# --- the recording ----------------------------------------------------------------------


async def test_conversation_page_audio_src_is_the_signed_url_serving_wav(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, client: httpx.AsyncClient
) -> None:
    agent = await make_agent(tenant)
    conversation = await recorded(ctx, tenant, agent["name"])
    await signed_in(browser, tenant)

    page = await page_of(browser, conversation)

    found = AUDIO.search(page.text)
    assert found is not None, text_of(page.text, "recording")
    src = html.unescape(found.group(1))
    url = urlsplit(src)
    assert f"{url.scheme}://{url.netloc}{url.path}" == (
        f"{PUBLIC_URL}/v1/conversations/{conversation}/audio"
    )
    assert re.fullmatch(r"expires=\d+&signature=[\w-]+", url.query)
    served = await client.get(f"{url.path}?{url.query}")  # no credential: the URL is one
    assert served.status_code == 200, served.text
    assert served.headers["content-type"] == "audio/wav"
    assert served.content == wav_bytes()
    # The page's own policy lets its <audio> load from that origin, and only this page's.
    assert page.headers.get_list("content-security-policy") == [
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        f"frame-ancestors 'none'; base-uri 'none'; media-src {PUBLIC_URL}"
    ]
    other = await browser.http.get("/dashboard/agents")
    assert "media-src" not in other.headers["content-security-policy"]


async def test_conversation_page_without_recording_says_why(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser
) -> None:
    agent = await make_agent(tenant)
    secret = await make_agent(tenant, data_retention_policy={"zero_data_retention": True})
    live = await spoken(ctx, tenant.org.id, agent["name"], ended=False)
    unrecorded = await spoken(ctx, tenant.org.id, agent["name"])
    kept_nothing = await spoken(ctx, tenant.org.id, secret["name"])
    deleted = await recorded(ctx, tenant, agent["name"])
    assert (await tenant.client.delete(f"/v1/conversations/{deleted}")).status_code == 200
    await signed_in(browser, tenant)

    shown = {
        conversation: await page_of(browser, conversation)
        for conversation in (live, unrecorded, kept_nothing, deleted)
    }

    for page in shown.values():
        assert "<audio" not in page.text
        assert "media-src" not in page.headers["content-security-policy"]
    assert text_of(shown[live].text, "no-recording") == (
        "No recording yet: it is stored when the conversation ends."
    )
    assert text_of(shown[unrecorded].text, "no-recording") == "No recording."
    assert text_of(shown[kept_nothing].text, "no-recording") == (
        "No recording: the conversation kept no data (zero data retention)."
    )
    assert text_of(shown[kept_nothing].text, "transcript-kept") == (
        "No transcript is kept (zero data retention)."
    )
    assert re.fullmatch(
        r"No recording: it was deleted \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.",
        text_of(shown[deleted].text, "no-recording"),
    )
    assert text_of(shown[deleted].text, "transcript-kept").startswith("The transcript was deleted")


# --- summary, transcript, redaction -----------------------------------------------------


async def test_conversation_page_summary_shown_with_redaction_marked(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.append(Round(text=["Booked for four; call back on [PHONE_NUMBER]."]))
    assert await summaries.summarize(ctx, tenant.org.id, conversation)
    await signed_in(browser, tenant)

    page = await page_of(browser, conversation)

    assert text_of(page.text, "summary") == "Booked for four; call back on [PHONE_NUMBER]."
    assert '<mark class="redacted">[PHONE_NUMBER]</mark>' in page.text


async def test_conversation_page_says_whether_redaction_was_on(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser
) -> None:
    redacting = await make_agent(tenant, enable_redaction=True)
    plain = await make_agent(tenant)
    redacted = await spoken(ctx, tenant.org.id, redacting["name"])
    kept = await spoken(ctx, tenant.org.id, plain["name"])
    await signed_in(browser, tenant)

    assert text_of((await page_of(browser, redacted)).text, "redaction").startswith("on:")
    assert text_of((await page_of(browser, kept)).text, "redaction") == "off"


async def test_conversation_page_transcript_marks_redaction_tags_and_escapes_the_rest(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser
) -> None:
    hostile = (
        "Mail [EMAIL] <script>alert(1)</script> or call [PHONE_NUMBER]; card [CREDIT_CARD], "
        '[SSN], [IBAN]. <mark class="redacted">[NOT_A_TAG]</mark> &amp; [email]'
    )
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"], [("user", hostile)])
    await signed_in(browser, tenant)

    page = await page_of(browser, conversation)

    transcript = re.search(r'<ol class="transcript" id="transcript">(.*?)</ol>', page.text, re.S)
    assert transcript is not None
    shown = transcript.group(1)
    assert "<script" not in page.text.lower()
    for tag in ("[EMAIL]", "[PHONE_NUMBER]", "[CREDIT_CARD]", "[SSN]", "[IBAN]"):
        assert f'<mark class="redacted">{tag}</mark>' in shown
    assert shown.count("<mark") == 5  # the typed <mark> and the lower-case tag are text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert (
        "&lt;mark class=&#34;redacted&#34;&gt;[NOT_A_TAG]&lt;/mark&gt; &amp;amp; [email]" in shown
    )


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("call [PHONE_NUMBER] now", 'call <mark class="redacted">[PHONE_NUMBER]</mark> now'),
        (
            "[EMAIL][SSN]",
            '<mark class="redacted">[EMAIL]</mark><mark class="redacted">[SSN]</mark>',
        ),
        ("<b>[IBAN]</b>", '&lt;b&gt;<mark class="redacted">[IBAN]</mark>&lt;/b&gt;'),
        ("[[CREDIT_CARD]]", '[<mark class="redacted">[CREDIT_CARD]</mark>]'),
        ("[PHONE_NUMBER", "[PHONE_NUMBER"),
        ("\"[NAME]\" & 'x'", "&#34;[NAME]&#34; &amp; &#39;x&#39;"),
    ],
    ids=["one-tag", "adjacent-tags", "markup-around", "brackets-around", "unclosed", "other"],
)
def test_redaction_marks_marks_tags_escapes_everything_else(text: str, marked: str) -> None:
    assert str(redaction_marks(text)) == marked


# --- extractions and evaluations --------------------------------------------------------


async def test_conversation_page_lists_extractions_and_evaluations(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    schema = await create_schema(tenant)
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.extend(
        [json_round({**GOOD, "Copay": None}), json_round({"result": "successful"})]
    )
    made = await tenant.client.post(
        f"/v1/conversations/{conversation}/extractions", json={"schema_id": schema["id"]}
    )
    judged = await tenant.client.post(
        f"/v1/conversations/{conversation}/evals", json={"prompt_id": prompt["id"]}
    )
    assert (made.status_code, judged.status_code) == (200, 200)
    await signed_in(browser, tenant)

    page = await page_of(browser, conversation)

    extraction = text_of(page.text, f"extraction-{made.json()['extraction']['id']}")
    assert "Appointment details" in extraction
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", extraction)
    section = re.search(r'<section class="extraction"[^>]*>(.*?)</section>', page.text, re.S)
    assert section is not None
    fields = re.findall(r"<dt>([^<]*)</dt><dd>(.*?)</dd>", section.group(1))
    assert fields == [
        ("Date", "9 Apr 2025"),
        ("Guests", "4"),
        ("Copay", '<span class="meta">not given</span>'),
        ("Confirmed as booked", "true"),
    ]
    evaluation = text_of(page.text, f"evaluation-{judged.json()['evaluation']['id']}")
    assert "used_chocolate" in evaluation
    assert "successful" in evaluation
    assert "UTC" in evaluation


async def test_run_extraction_form_stores_it_and_shows_it_with_a_notice(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    schema = await create_schema(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)
    before = await page_of(browser, conversation)
    assert text_of(before.text, "no-extractions") == "None yet."
    chosen = form_values(before.text, "run-extraction")
    assert chosen == {"schema_id": schema["id"]}
    chat.script.rounds.append(json_round(GOOD))

    response = await browser.http.post(
        f"/dashboard/conversations/{conversation}/extractions",
        data={"csrf_token": csrf_of(before.text), **chosen},
    )

    assert response.status_code == 303, response.text
    location = f"/dashboard/conversations/{conversation}?done=extraction_made"
    assert response.headers["location"] == location
    after = await browser.http.get(location)
    assert "Extraction done: its fields are listed below." in after.text
    assert "9 Apr 2025" in after.text
    assert APPOINTMENT["prompt"] in chat.requests[0].body["messages"][0]["content"]
    listed = await tenant.client.get(f"/v1/conversations/{conversation}/extractions")
    assert [e["result"] for e in listed.json()["extractions"]] == [GOOD]


async def test_run_evaluation_form_stores_the_verdict_and_shows_it(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)
    chat.script.rounds.append(json_round({"result": "unsuccessful"}))

    response = await browser.post(
        f"/dashboard/conversations/{conversation}/evaluations", {"prompt_id": prompt["id"]}
    )

    assert response.status_code == 303, response.text
    after = await browser.http.get(response.headers["location"])
    assert "Evaluation done: its result is listed below." in after.text
    rows = text_of(after.text, "evaluations")
    assert "used_chocolate" in rows
    assert "unsuccessful" in rows
    listed = await tenant.client.get(f"/v1/conversations/{conversation}/evals")
    assert [e["result"] for e in listed.json()["evals"]] == ["unsuccessful"]


async def test_run_forms_without_schemas_or_prompts_link_to_their_pages(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)

    page = await page_of(browser, conversation)

    assert text_of(page.text, "run-extraction").startswith("No extraction schema in project main")
    assert text_of(page.text, "run-evaluation").startswith("No evaluation prompt in project main")
    assert 'href="/dashboard/extraction-schemas"' in page.text


@pytest.mark.parametrize(
    ("steer", "status", "code"),
    [
        ({"rounds": [json_round("not json"), json_round({"Date": "x"})]}, 502, "extraction_failed"),
        ({"status": 500}, 503, "service_unavailable"),
    ],
    ids=["answer-unusable-twice", "model-unreachable"],
)
async def test_run_extraction_model_failures_shown_beside_the_form_nothing_stored(
    tenant: Tenant,
    ctx: Context,
    make_agent: MakeAgent,
    browser: Browser,
    chat: ChatServer,
    steer: dict[str, Any],
    status: int,
    code: str,
) -> None:
    schema = await create_schema(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)
    chat.script.rounds.extend(steer.get("rounds", []))
    chat.script.status = steer.get("status", 200)

    response = await browser.post(
        f"/dashboard/conversations/{conversation}/extractions", {"schema_id": schema["id"]}
    )

    assert response.status_code == status
    assert code in text_of(response.text, "run-extraction-error")
    assert form_values(response.text, "run-extraction") == {"schema_id": schema["id"]}
    assert f"Conversation <code>{conversation}</code>" in response.text  # the page, again
    if status == 503:
        assert response.headers["retry-after"] == "2"
    listed = await tenant.client.get(f"/v1/conversations/{conversation}/extractions")
    assert listed.json()["extractions"] == []


async def test_run_evaluation_model_unreachable_503_beside_the_form(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)
    chat.script.status = 500

    response = await browser.post(
        f"/dashboard/conversations/{conversation}/evaluations", {"prompt_id": prompt["id"]}
    )

    assert response.status_code == 503
    assert "service_unavailable" in text_of(response.text, "run-evaluation-error")
    listed = await tenant.client.get(f"/v1/conversations/{conversation}/evals")
    assert listed.json()["evals"] == []


async def test_run_forms_without_a_transcript_409_no_transcript(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    schema = await create_schema(tenant)
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant, data_retention_policy={"zero_data_retention": True})
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)
    path = f"/dashboard/conversations/{conversation}"

    extraction = await browser.post(f"{path}/extractions", {"schema_id": schema["id"]})
    evaluation = await browser.post(f"{path}/evaluations", {"prompt_id": prompt["id"]})

    assert (extraction.status_code, evaluation.status_code) == (409, 409)
    assert "no_transcript" in text_of(extraction.text, "run-extraction-error")
    assert "no_transcript" in text_of(evaluation.text, "run-evaluation-error")
    assert chat.requests == []


async def test_run_extraction_nothing_chosen_400_beside_the_field(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser
) -> None:
    await create_schema(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)

    response = await browser.post(f"/dashboard/conversations/{conversation}/extractions", {})

    assert response.status_code == 400
    assert text_of(response.text, "run-extraction-schema_id-error") == "is required"


async def test_run_forms_without_a_language_model_409_no_language_model(
    settings_factory: Any, tmp_path: Path
) -> None:
    settings = settings_factory(recordings_dir=tmp_path / "recordings")
    async with tenant_of(settings) as (app, tenant), browser_on(app) as browser:
        agent = (await tenant.client.post("/v1/agents", json={"name": "a1"})).json()["agent"]
        schema = await create_schema(tenant)
        prompt = await create_prompt(tenant)
        conversation = await spoken(app.state.context, tenant.org.id, agent["name"])
        await signed_in(browser, tenant)
        path = f"/dashboard/conversations/{conversation}"

        extraction = await browser.post(f"{path}/extractions", {"schema_id": schema["id"]})
        evaluation = await browser.post(f"{path}/evaluations", {"prompt_id": prompt["id"]})

    assert (extraction.status_code, evaluation.status_code) == (409, 409)
    assert "no_language_model" in text_of(extraction.text, "run-extraction-error")
    assert "no_language_model" in text_of(evaluation.text, "run-evaluation-error")


async def test_run_forms_without_csrf_token_refused_nothing_run(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, browser: Browser, chat: ChatServer
) -> None:
    schema = await create_schema(tenant)
    prompt = await create_prompt(tenant)
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    await signed_in(browser, tenant)
    path = f"/dashboard/conversations/{conversation}"
    posts = [
        (f"{path}/extractions", {"schema_id": schema["id"]}),
        (f"{path}/evaluations", {"prompt_id": prompt["id"]}),
    ]

    for target, data in posts:
        for token in [None, "0" * 64]:
            sent = data if token is None else {**data, "csrf_token": token}
            response = await browser.http.post(target, data=sent)
            assert response.status_code == 403, target
            assert "csrf_failed" in response.text

    assert chat.requests == []


async def test_run_extraction_on_another_orgs_conversation_404_nothing_run(
    tenant: Tenant,
    other_tenant: Tenant,
    ctx: Context,
    make_agent: MakeAgent,
    browser: Browser,
    chat: ChatServer,
) -> None:
    agent = await make_agent(other_tenant)
    theirs = await spoken(ctx, other_tenant.org.id, agent["name"])
    schema = await create_schema(tenant)
    await signed_in(browser, tenant)

    page = await browser.http.get(f"/dashboard/conversations/{theirs}")
    run = await browser.post(
        f"/dashboard/conversations/{theirs}/extractions", {"schema_id": schema["id"]}
    )

    assert (page.status_code, run.status_code) == (404, 404)
    assert "table for four" not in page.text + run.text
    assert chat.requests == []
