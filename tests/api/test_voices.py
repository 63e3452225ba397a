"""`GET /v1/voices` and the agent's voice and language checks (API.md section 4), against
the engine the app builds (hibari's voices on disk, the bundled tiny.en recognizer)."""

from __future__ import annotations

import httpx
import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.engine import PlaceholderRecognizer, WhisperRecognizer, load_synthesizer
from parley.services.voices import EngineSpeech, UnsupportedLanguage, check_speech


@pytest.mark.anyio
async def test_list_voices_shows_the_installed_voices(tenant: Tenant) -> None:
    response = await tenant.client.get("/v1/voices", params={"model": "merritt"})
    assert response.status_code == 200, response.text
    voices = response.json()["voices"]
    (heart,) = [voice for voice in voices if voice["id"] == "heart"]
    assert (heart["name"], heart["language"]) == ("Heart", "en")
    keys = {"id", "name", "language", "description", "audio_url"}  # + the SDK's (API.md 17)
    assert all(set(voice) == keys for voice in voices)


@pytest.mark.anyio
async def test_list_voices_without_api_key_401(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/voices"), 401, "unauthorized")


@pytest.mark.anyio
async def test_create_agent_unknown_voice_400(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "a", "voice_id": "nobody"})
    body = assert_error(response, 400, "unknown_voice")
    assert "voice_id" in body["param_errors"]
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


@pytest.mark.anyio
async def test_create_agent_listed_voice_or_its_alias_accepted(tenant: Tenant) -> None:
    for name, voice in (("listed", "heart"), ("alias", "us_female")):
        response = await tenant.client.post("/v1/agents", json={"name": name, "voice_id": voice})
        assert response.status_code == 201, response.text


@pytest.mark.anyio
async def test_update_agent_unknown_voice_400(tenant: Tenant) -> None:
    assert (await tenant.client.post("/v1/agents", json={"name": "a"})).status_code == 201
    response = await tenant.client.patch("/v1/agents/a", json={"voice_id": "nobody"})
    assert_error(response, 400, "unknown_voice")
    assert (await tenant.client.get("/v1/agents/a")).json()["agent"]["voice_id"] == "us_female"


def test_speech_check_tiny_en_recognizer_knows_only_english() -> None:
    speech = EngineSpeech(load_synthesizer(), WhisperRecognizer())
    assert speech.languages() == {"en"}
    check_speech(speech, voice_id=None, language="en")
    with pytest.raises(UnsupportedLanguage) as refused:
        check_speech(speech, voice_id=None, language="de")
    assert refused.value.code == "unsupported_language"
    assert refused.value.param_errors == {"language": "must be one of: en"}


def test_speech_check_placeholder_recognizer_takes_any_language() -> None:
    speech = EngineSpeech(load_synthesizer(), PlaceholderRecognizer())
    check_speech(speech, voice_id="heart", language="de")


@pytest.mark.anyio
async def test_create_agent_additional_languages_tiny_en_unsupported_language(
    tenant: Tenant,
) -> None:
    made = await tenant.client.post(
        "/v1/agents",
        json={"name": "a", "additional_languages": ["de"], "multilingual_mode": "auto"},
    )
    body = assert_error(made, 400, "unsupported_language")
    assert "PARLEY_STT_MODEL=base" in body["param_errors"]["additional_languages"]
