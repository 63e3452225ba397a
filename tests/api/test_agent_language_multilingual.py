"""The agent's `language` through the REST API (API.md 4) on a server whose recognizer is
Whisper base (PARLEY_STT_MODEL=base): any language Whisper hears, 400 for others."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.config import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(stt_model="base")
    return built


async def test_agent_language_whisper_base_accepts_its_languages(tenant: Tenant) -> None:
    made = await tenant.client.post("/v1/agents", json={"name": "a", "language": "de"})
    assert made.status_code == 201, made.text
    assert made.json()["agent"]["language"] == "de"
    changed = await tenant.client.patch("/v1/agents/a", json={"language": "es"})
    assert changed.status_code == 200, changed.text
    assert (await tenant.client.get("/v1/agents/a")).json()["agent"]["language"] == "es"


async def test_agent_language_whisper_base_refuses_one_it_does_not_hear(tenant: Tenant) -> None:
    made = await tenant.client.post("/v1/agents", json={"name": "a", "language": "xx"})
    body = assert_error(made, 400, "unsupported_language")
    assert "de, el, en, es" in body["param_errors"]["language"]
