"""The agent forms pick the voice from the installed voices (GET /v1/voices's list), and a
voice the server does not have is refused with `unknown_voice`, the form shown again."""

from __future__ import annotations

import re

import pytest

from parley.engine import EspeakSynthesizer
from parley.services.voices import Voice
from parley.web.agent_forms import voice_choices
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, csrf_of

pytestmark = pytest.mark.anyio

OTHER_LANGUAGES = [(voice, False) for voice in EspeakSynthesizer.language_voices()]
SELECT = re.compile(r'<select name="voice_id"[^>]*>(.*?)</select>', re.DOTALL)


def options(page: str) -> list[tuple[str, bool]]:
    found = SELECT.search(page)
    assert found, "the form must have a voice picker"
    return [
        (value, " selected" in attributes)
        for value, attributes in re.findall(r'<option value="([^"]*)"([^>]*)>', found.group(1))
    ]


async def test_create_agent_form_picks_voice_from_installed_voices(
    tenant: Tenant, browser: Browser
) -> None:
    await browser.sign_in(tenant.api_key)
    page = await browser.http.get("/dashboard/agents")
    # hibari's voice, then espeak-ng's of the other languages (API.md section 18)
    assert options(page.text) == [("us_female", True), ("heart", False), *OTHER_LANGUAGES]
    assert '<input name="voice_id"' not in page.text


async def test_edit_agent_form_keeps_current_voice_selected(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"voice_id": "heart"})
    await browser.sign_in(tenant.api_key)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    assert options(page.text) == [("heart", True), *OTHER_LANGUAGES]


async def test_edit_agent_form_unknown_voice_refused_and_shown_again(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await browser.sign_in(tenant.api_key)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    response = await browser.http.post(
        f"/dashboard/agents/{agent['id']}",
        data={"csrf_token": csrf_of(page.text), "name": agent["name"], "voice_id": "nobody"},
    )
    assert response.status_code == 400
    assert "unknown_voice" in response.text
    assert ("nobody", True) in options(response.text)  # what was sent, to correct it


def test_voice_choices_put_an_unlisted_current_voice_first() -> None:
    heart = Voice(id="heart", name="Heart", language="en")
    assert voice_choices([heart], "heart") == [("heart", "Heart (en)")]
    assert voice_choices([heart], "us_female") == [
        ("us_female", "us_female"),
        ("heart", "Heart (en)"),
    ]
