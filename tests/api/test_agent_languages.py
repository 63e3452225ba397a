"""An agent's languages through the REST API (API.md sections 4 and 18; services/languages.py)
on a server whose recognizer is Whisper base: `default_language` with `language` as its
alias, `additional_languages`, `multilingual_mode`, and the voices of each language."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.config import Settings

pytestmark = pytest.mark.anyio
EXTRA = "additional_languages"


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(stt_model="base")
    return built


async def test_agent_languages_created_shown_and_read_back(tenant: Tenant) -> None:
    body = {
        "name": "a",
        "default_language": "de",
        "additional_languages": ["en", "es"],
        "multilingual_mode": "initial",
    }
    made = await tenant.client.post("/v1/agents", json=body)
    assert made.status_code == 201, made.text
    read = (await tenant.client.get("/v1/agents/a")).json()["agent"]
    shown = {key: read[key] for key in ("language", "default_language", "additional_languages")}
    assert shown == {
        "language": "de",
        "default_language": "de",
        "additional_languages": ["en", "es"],
    }
    assert read["multilingual_mode"] == "initial"


async def test_agent_default_language_wins_over_its_alias_language(tenant: Tenant) -> None:
    made = await tenant.client.post(
        "/v1/agents", json={"name": "a", "language": "en", "default_language": "es"}
    )
    assert made.status_code == 201, made.text
    assert made.json()["agent"]["language"] == "es"
    changed = await tenant.client.patch(
        "/v1/agents/a", json={"language": "de", "default_language": "en"}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["agent"]["default_language"] == "en"
    alias = await tenant.client.patch("/v1/agents/a", json={"language": "de"})
    assert alias.json()["agent"]["default_language"] == "de"


async def test_agent_multilingual_mode_null_means_auto(tenant: Tenant) -> None:
    made = await tenant.client.post(
        "/v1/agents", json={"name": "a", "multilingual_mode": "request"}
    )
    assert made.json()["agent"]["multilingual_mode"] == "request"
    cleared = await tenant.client.patch("/v1/agents/a", json={"multilingual_mode": None})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["agent"]["multilingual_mode"] == "auto"


async def test_agent_languages_patched_checked_as_the_agent_they_make(tenant: Tenant) -> None:
    assert (await tenant.client.post("/v1/agents", json={"name": "a"})).status_code == 201
    added = await tenant.client.patch("/v1/agents/a", json={"additional_languages": ["de"]})
    assert added.json()["agent"]["additional_languages"] == ["de"]
    # the default made German while German is already an additional language
    clash = await tenant.client.patch("/v1/agents/a", json={"default_language": "de"})
    body = assert_error(clash, 400, "validation_error")
    assert "default language" in body["param_errors"]["additional_languages"]
    read = (await tenant.client.get("/v1/agents/a")).json()["agent"]
    assert (read["language"], read["additional_languages"]) == ("en", ["de"])


async def test_agent_languages_upserted(tenant: Tenant) -> None:
    body = {"name": "a", "default_language": "es", "additional_languages": ["en"]}
    first = await tenant.client.put("/v1/agents/upsert", json=body)
    assert first.status_code == 200, first.text
    assert first.json()["agent"]["additional_languages"] == ["en"]
    again = await tenant.client.put("/v1/agents/upsert", json={"name": "a"})
    assert (again.json()["agent"]["language"], again.json()["agent"]["additional_languages"]) == (
        "en",
        [],
    )


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"additional_languages": ["de", "es", "fr", "it", "pt"]}, "validation_error", EXTRA),
        ({"additional_languages": ["de", "de"]}, "validation_error", "additional_languages"),
        ({"additional_languages": ["en"]}, "validation_error", "additional_languages"),
        ({"additional_languages": ["xx"]}, "unsupported_language", "additional_languages"),
        ({"additional_languages": ["ja"]}, "unsupported_language", "additional_languages"),
        ({"additional_languages": ["DE"]}, "validation_error", "additional_languages.0"),
        ({"default_language": "ja"}, "unsupported_language", "language"),
        ({"multilingual_mode": "sometimes"}, "validation_error", "multilingual_mode"),
    ],
    ids=["five", "twice", "default", "unheard", "no-voice", "upper-case", "no-voice-de", "mode"],
)  # fmt: skip
async def test_agent_languages_refused_400_naming_the_field(
    tenant: Tenant, body: dict[str, Any], code: str, field: str
) -> None:
    made = await tenant.client.post("/v1/agents", json={"name": "a", **body})
    refused = assert_error(made, 400, code)
    assert field in refused["param_errors"], refused
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


async def test_agent_language_without_a_voice_says_so(tenant: Tenant) -> None:
    made = await tenant.client.post(
        "/v1/agents", json={"name": "a", "additional_languages": ["ja"]}
    )
    body = assert_error(made, 400, "unsupported_language")
    assert body["param_errors"]["additional_languages"] == "no installed voice speaks 'ja'"


async def test_list_voices_each_with_its_language(tenant: Tenant) -> None:
    voices = (await tenant.client.get("/v1/voices")).json()["voices"]
    languages = {voice["id"]: voice["language"] for voice in voices}
    assert (languages["heart"], languages["espeak-de"], languages["espeak-es"]) == (
        "en",
        "de",
        "es",
    )


async def test_conversation_shows_its_agents_languages_and_none_heard_yet(tenant: Tenant) -> None:
    body = {"name": "a", "additional_languages": ["de"], "multilingual_mode": "request"}
    assert (await tenant.client.post("/v1/agents", json=body)).status_code == 201
    made = await tenant.client.post("/v1/conversations", json={"agent": "a"})
    assert made.status_code == 201, made.text
    shown = made.json()["conversation"]
    languages = {key: shown[key] for key in ("default_language", "additional_languages")}
    assert languages == {"default_language": "en", "additional_languages": ["de"]}
    assert (shown["multilingual_mode"], shown["heard_languages"]) == ("request", [])
