"""A browser-like client of the dashboard: cookies, forms with their CSRF token."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found is not None, html[:500]
    return found.group(1)


@dataclass
class Browser:
    """An httpx client that keeps cookies, like a browser on the dashboard."""

    http: httpx.AsyncClient

    async def sign_in(self, api_key: str) -> httpx.Response:
        page = await self.http.get("/dashboard/sign-in")
        return await self.http.post(
            "/dashboard/sign-in", data={"csrf_token": csrf_of(page.text), "api_key": api_key}
        )

    async def csrf(self, path: str = "/dashboard/agents") -> str:
        page = await self.http.get(path)
        assert page.status_code == 200, page.text
        return csrf_of(page.text)

    async def post(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        token = await self.csrf()
        return await self.http.post(path, data={"csrf_token": token, **(data or {})})
