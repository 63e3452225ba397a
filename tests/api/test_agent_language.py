"""The agent's `language` through the REST API (API.md 4) with the default recognizer,
tiny.en: English only. tests/api/test_agent_language_multilingual.py runs Whisper base."""

from __future__ import annotations

import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

pytestmark = pytest.mark.anyio


async def test_agent_language_english_accepted_by_tiny_en(tenant: Tenant) -> None:
    made = await tenant.client.post("/v1/agents", json={"name": "a", "language": "en"})
    assert made.status_code == 201, made.text
    assert made.json()["agent"]["language"] == "en"


async def test_agent_language_other_than_english_refused_by_tiny_en(tenant: Tenant) -> None:
    made = await tenant.client.post("/v1/agents", json={"name": "a", "language": "de"})
    body = assert_error(made, 400, "unsupported_language")
    assert body["param_errors"] == {
        "language": "must be one of: en; other languages need a multilingual speech model "
        "(PARLEY_STT_MODEL=base)"
    }
    assert (await tenant.client.post("/v1/agents", json={"name": "a"})).status_code == 201
    changed = await tenant.client.patch("/v1/agents/a", json={"language": "es"})
    assert_error(changed, 400, "unsupported_language")
    assert (await tenant.client.get("/v1/agents/a")).json()["agent"]["language"] == "en"


@pytest.mark.parametrize("language", ["EN", "en-US", "english", "e", ""])
async def test_agent_language_not_a_primary_tag_refused(tenant: Tenant, language: str) -> None:
    made = await tenant.client.post("/v1/agents", json={"name": "a", "language": language})
    body = assert_error(made, 400, "validation_error")
    assert "BCP 47 primary language tag" in body["param_errors"]["language"]
