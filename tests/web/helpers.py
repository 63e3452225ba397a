"""A browser-like client of the dashboard: cookies, forms with their CSRF token."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser

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

    async def post(
        self, path: str, data: Mapping[str, str | list[str]] | None = None
    ) -> httpx.Response:
        """Post a form with this session's CSRF token; a list is a repeated field."""
        token = await self.csrf()
        return await self.http.post(path, data={"csrf_token": token, **(data or {})})


class _FormReader(HTMLParser):
    """Collects what a browser would post from one form, and the text of elements by ID."""

    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.found = False
        self.fields: dict[str, list[str]] = {}
        self._textarea: str | None = None
        self._select: str | None = None
        self._option: dict[str, str | None] | None = None
        self._option_text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = self.found = True
        if not self.inside:
            return
        name = a.get("name") or ""
        if tag == "input" and name and name != "csrf_token":
            kind = a.get("type", "text")
            if kind not in ("checkbox", "radio"):
                self.fields.setdefault(name, []).append(a.get("value") or "")
            elif "checked" in a:  # a browser posts "on" for a box without a value
                self.fields.setdefault(name, []).append(a.get("value") or "on")
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields.setdefault(name, []).append("")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select is not None:
            self._option, self._option_text = a, ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea][-1] += data
        if self._option is not None:
            self._option_text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "option" and self._option is not None and self._select is not None:
            if "selected" in self._option:
                value = self._option.get("value") or self._option_text
                self.fields.setdefault(self._select, []).append(value)
            self._option = None
        elif tag == "select":
            self._select = None


def form_values(html: str, form_id: str) -> dict[str, str]:
    """What form `form_id` would post now (CSRF token aside; repeated fields joined by ',')."""
    reader = _FormReader(form_id)
    reader.feed(html)
    assert reader.found, f"no form #{form_id} in the page"
    return {name: ",".join(values) for name, values in reader.fields.items()}


def text_of(html: str, element_id: str) -> str:
    """The text of the element with this ID (nested markup removed), or '' if absent."""
    found = re.search(rf'<(\w+)[^>]*\bid="{re.escape(element_id)}"[^>]*>(.*?)</\1>', html, re.S)
    if found is None:
        return ""
    return unescape(re.sub(r"<[^>]+>", "", found.group(2))).strip()
