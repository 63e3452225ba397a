"""/docs works offline: Swagger UI and its assets come from Parley, never from another host."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from parley.api.openapi import WEBSOCKET_DESCRIPTION
from parley.app import create_app
from parley.wires.frames import CLIENT_MESSAGE_TYPES

pytestmark = pytest.mark.anyio


@pytest.fixture
async def http(settings_factory: Any) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings_factory())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://parley.test") as client:
            yield client


async def test_docs_page_references_no_external_host(http: httpx.AsyncClient) -> None:
    page = await http.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert re.findall(r"(?:https?:)?//[\w.-]+", page.text) == []
    references = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sorted(references) == [
        "/docs/assets/favicon.png",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
    ]
    assert "url: '/openapi.json'" in page.text
    assert '"validatorUrl": null' in page.text


async def test_docs_assets_answer_200_without_credential(http: httpx.AsyncClient) -> None:
    for path, kind in [
        ("/docs/assets/swagger-ui-bundle.js", "javascript"),
        ("/docs/assets/swagger-ui.css", "text/css"),
        ("/docs/assets/favicon.png", "image/png"),
    ]:
        response = await http.get(path)
        assert response.status_code == 200, path
        assert kind in response.headers["content-type"], path
        assert len(response.content) > 1000, path
    bundle = (await http.get("/docs/assets/swagger-ui-bundle.js")).text
    assert "SwaggerUIBundle" in bundle


async def test_docs_unknown_asset_404_envelope(http: httpx.AsyncClient) -> None:
    response = await http.get("/docs/assets/nope.js")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_openapi_description_lists_every_websocket_message(http: httpx.AsyncClient) -> None:
    description = (await http.get("/openapi.json")).json()["info"]["description"]
    assert "/v1/sts/ws" in description
    for message in sorted(CLIENT_MESSAGE_TYPES):
        assert f"`{message}`" in WEBSOCKET_DESCRIPTION, message
        assert f"`{message}`" in description, message
    for message in ["conversation_created", "input_text", "interrupted_response", "warning"]:
        assert f"`{message}`" in description, message
