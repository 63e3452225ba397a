"""/examples/browser/: the browser client served by Parley, from the package."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.api.examples import examples_directory
from parley.app import create_app

pytestmark = pytest.mark.anyio
REPO_COPY = Path(__file__).resolve().parents[2] / "examples" / "browser" / "index.html"


@pytest.fixture
async def http(settings_factory: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings_factory())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://parley.test") as client:
            yield client


async def test_examples_browser_page_served_without_credential(http: httpx.AsyncClient) -> None:
    page = await http.get("/examples/browser/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.text == (examples_directory() / "browser" / "index.html").read_text()
    assert "<title>Parley voice client</title>" in page.text


async def test_examples_browser_without_slash_redirects(http: httpx.AsyncClient) -> None:
    response = await http.get("/examples/browser")
    assert response.status_code in (301, 307)
    assert response.headers["location"].endswith("/examples/browser/")


async def test_examples_page_loads_nothing_from_another_host(http: httpx.AsyncClient) -> None:
    text = (await http.get("/examples/browser/")).text
    assert re.findall(r'(?:src|href)="(?:https?:)?//', text) == []
    assert "<script src" not in text


async def test_examples_page_reads_credential_from_fragment_not_query(
    http: httpx.AsyncClient,
) -> None:
    text = (await http.get("/examples/browser/")).text
    assert 'location.hash.replace(/^#/, "")' in text
    assert "location.search)" in text  # only to rebuild the address without the fragment
    assert "URLSearchParams(location.search" not in text
    assert '`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}`' in text


async def test_examples_unknown_file_404_envelope(http: httpx.AsyncClient) -> None:
    response = await http.get("/examples/browser/nope.js")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_examples_repository_path_is_the_packaged_page() -> None:
    assert REPO_COPY.resolve() == (examples_directory() / "browser" / "index.html").resolve()
