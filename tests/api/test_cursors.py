"""Issue #9 finding 7: a cursor the service did not issue is 400 `invalid_cursor` on every
listing and database, never a 500; the cursors it issues keep working."""

from __future__ import annotations

import base64
import json

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


def crafted(value: object, *, ascii_only: bool = True) -> str:
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def crafted_bytes(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


AGENT = "agent_" + "a" * 32
CURSORS = [
    ("lone-surrogate-id", crafted(["2026-01-01T00:00:00+00:00", "\ud800"])),
    ("nul-id", crafted(["2026-01-01T00:00:00+00:00", "a\x00"])),
    ("empty-id", crafted(["2026-01-01T00:00:00+00:00", ""])),
    ("year-1-minus-offset", crafted(["0001-01-01T00:00:00-14:00", AGENT])),
    ("year-9999-plus-offset", crafted(["9999-12-31T23:59:59+14:00", AGENT])),
    ("naive-date", crafted(["2026-01-01T00:00:00", AGENT])),
    ("not-a-date", crafted(["yesterday", AGENT])),
    ("number-date", crafted([1, AGENT])),
    ("three-members", crafted(["2026-01-01T00:00:00+00:00", AGENT, 1])),
    ("object", crafted({"a": 1})),
    ("padded", crafted(["2026-01-01T00:00:00+00:00", AGENT]) + "="),
    ("not-utf8", crafted_bytes(b"\xff\xfe[]")),
    ("not-canonical-spaces", crafted_bytes(b'["2026-01-01T00:00:00+00:00", "c1"]')),
    ("garbage", "!!!"),
    ("non-ascii", "é"),
    ("deep-json", crafted_bytes(b"[" * 300 + b"]" * 300)[:500]),
]


@pytest.mark.parametrize(
    "path", ["/v1/agents", "/v1/projects", "/v1/api_keys", "/v1/conversations"]
)
@pytest.mark.parametrize("cursor", [c[1] for c in CURSORS], ids=[c[0] for c in CURSORS])
async def test_crafted_cursor_400_invalid_cursor(tenant: Tenant, path: str, cursor: str) -> None:
    response = await tenant.client.get(path, params={"cursor": cursor})
    body = assert_error(response, 400, "invalid_cursor")
    assert set(body["param_errors"]) == {"cursor"}


async def test_issued_cursor_pages_through(tenant: Tenant, make_agent: MakeAgent) -> None:
    made = {(await make_agent(tenant))["id"] for _ in range(3)}
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = (await tenant.client.get("/v1/agents", params=params)).json()
        seen += [agent["id"] for agent in page["agents"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert set(seen) == made
    assert len(seen) == 3
