"""Dashboard clients over the real app (ASGI), one cookie jar each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI

from tests.web.helpers import Browser

MakeBrowser = Callable[[], Awaitable[Browser]]


@pytest.fixture
async def make_browser(app: FastAPI) -> AsyncIterator[MakeBrowser]:
    clients: list[httpx.AsyncClient] = []

    async def make() -> Browser:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        http = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        clients.append(http)
        return Browser(http)

    try:
        yield make
    finally:
        for http in clients:
            await http.aclose()


@pytest.fixture
async def browser(make_browser: MakeBrowser) -> Browser:
    return await make_browser()
