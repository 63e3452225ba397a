"""Behind a reverse proxy (issue #22 item 5): with PARLEY_TRUSTED_PROXIES naming the proxy,
its `X-Forwarded-For` sets the client that the sign-in throttle, the audit trail, the
access log and the workspace's IP allowlist (API.md section 17, REST and the socket) see,
and its `X-Forwarded-Proto: https` makes the dashboard's cookies `Secure`; without it (the
default) those headers are ignored, whoever sends them.

A real `parley serve` is the proxy's upstream; the test plays the proxy on 127.0.0.1.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.api.helpers import assert_error
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ATTACKER = "203.0.113.7"
OPERATOR = "198.51.100.20"
SIGN_IN_BURST = 10
"""services/dashboard.py: ten failed sign-ins per address, then 429 for 60 s."""


def start(tmp_path_factory: pytest.TempPathFactory, **variables: str) -> Iterator[ServeProcess]:
    process = ServeProcess(
        tmp_path_factory.mktemp("proxy"),
        PARLEY_DATABASE_URL="sqlite:///parley.db",
        PARLEY_LOG_LEVEL="info",
    )
    process.env.update(variables)
    try:
        process.start()
        yield process
    finally:
        process.ensure_stopped()


@pytest.fixture(scope="module")
def behind_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    yield from start(tmp_path_factory, PARLEY_TRUSTED_PROXIES="10.0.0.0/8, 127.0.0.1")


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    yield from start(tmp_path_factory)


async def sign_in(
    client: httpx.AsyncClient, api_key: str, *, forwarded_for: str, proto: str = "http"
) -> httpx.Response:
    """POST the sign-in form as a browser behind the proxy would (double-submit token)."""
    token = secrets.token_urlsafe(24)
    return await client.post(
        "/dashboard/sign-in",
        data={"csrf_token": token, "api_key": api_key},
        headers={
            "Cookie": f"parley_dashboard_sign_in={token}",
            "X-Forwarded-For": forwarded_for,
            "X-Forwarded-Proto": proto,
        },
    )


async def fail_until_throttled(client: httpx.AsyncClient, forwarded_for: str) -> None:
    for _ in range(SIGN_IN_BURST):
        refused = await sign_in(client, "parley_sk_wrong", forwarded_for=forwarded_for)
        assert refused.status_code == 401, refused.text
    throttled = await sign_in(client, "parley_sk_wrong", forwarded_for=forwarded_for)
    assert throttled.status_code == 429, throttled.text


async def test_trusted_proxy_throttle_keyed_on_forwarded_client_operator_signs_in(
    behind_proxy: ServeProcess,
) -> None:
    assert behind_proxy.first_key is not None
    async with httpx.AsyncClient(base_url=behind_proxy.http, timeout=10) as client:
        await fail_until_throttled(client, f"{OPERATOR}, {ATTACKER}")
        signed = await sign_in(
            client, behind_proxy.first_key, forwarded_for=f"{OPERATOR}, 10.1.2.3", proto="https"
        )
        assert signed.status_code == 303, signed.text
        cookies = signed.headers.get_list("set-cookie")
        assert any(c.startswith("parley_dashboard=") and "Secure" in c for c in cookies), cookies
        audit = await client.get(
            "/v1/audit_events",
            headers={"Authorization": f"Bearer {behind_proxy.first_key}"},
        )
    assert audit.status_code == 200, audit.text
    sign_ins = [e for e in audit.json()["audit_events"] if e["action"] == "dashboard.sign_in"]
    assert [e["client"] for e in sign_ins] == [OPERATOR]
    log = behind_proxy.output.read_text()
    assert f'{ATTACKER} "POST /dashboard/sign-in" 429' in log
    assert f'{OPERATOR} "POST /dashboard/sign-in" 303' in log


async def test_trusted_proxy_plain_http_cookie_not_secure(behind_proxy: ServeProcess) -> None:
    assert behind_proxy.first_key is not None
    async with httpx.AsyncClient(base_url=behind_proxy.http, timeout=10) as client:
        signed = await sign_in(client, behind_proxy.first_key, forwarded_for="192.0.2.1")
    assert signed.status_code == 303, signed.text
    assert not any("Secure" in c for c in signed.headers.get_list("set-cookie"))


async def test_untrusted_peer_forwarded_headers_ignored(exposed: ServeProcess) -> None:
    assert exposed.first_key is not None
    async with httpx.AsyncClient(base_url=exposed.http, timeout=10) as client:
        await fail_until_throttled(client, ATTACKER)
        # A client cannot escape the throttle by claiming another address.
        claimed = await sign_in(client, exposed.first_key, forwarded_for=OPERATOR, proto="https")
    assert claimed.status_code == 429, claimed.text
    assert '127.0.0.1 "POST /dashboard/sign-in" 429' in exposed.output.read_text()


# --- the workspace's IP allowlist (API.md section 17) -----------------------------------

OFFICE = "203.0.113.5"
ELSEWHERE = "198.51.100.20"


def keyed(serve: ServeProcess, forwarded_for: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {serve.first_key}", "X-Forwarded-For": forwarded_for}


async def handshake(serve: ServeProcess, forwarded_for: str) -> tuple[int, str]:
    """Open the conversation socket with the API key: 101, or the refusal's status and code."""
    try:
        async with connect(f"{serve.ws}/v1/sts/ws", additional_headers=keyed(serve, forwarded_for)):
            return 101, ""
    except InvalidStatus as refused:
        body = json.loads(refused.response.body or b"{}")
        return refused.response.status_code, body["error"]["code"]


async def test_ip_allowlist_behind_trusted_proxy_forwarded_client_decides_rest_and_socket(
    behind_proxy: ServeProcess,
) -> None:
    async with httpx.AsyncClient(base_url=behind_proxy.http, timeout=10) as client:
        patched = await client.patch(
            "/v1/workspace",
            json={"ip_allowlist": ["203.0.113.0/24"]},
            headers=keyed(behind_proxy, OFFICE),
        )
        assert patched.status_code == 200, patched.text
        try:
            allowed = await client.get("/v1/agents", headers=keyed(behind_proxy, OFFICE))
            assert allowed.status_code == 200, allowed.text
            refused = await client.get("/v1/agents", headers=keyed(behind_proxy, ELSEWHERE))
            assert_error(refused, 403, "ip_not_allowed")
            # The proxy appends the address it saw: what a client wrote before it counts not.
            spoofed = await client.get(
                "/v1/agents", headers=keyed(behind_proxy, f"{OFFICE}, {ELSEWHERE}")
            )
            assert_error(spoofed, 403, "ip_not_allowed")
            assert await handshake(behind_proxy, ELSEWHERE) == (403, "ip_not_allowed")
            assert await handshake(behind_proxy, OFFICE) == (101, "")
            locked_out = await client.patch(
                "/v1/workspace",
                json={"ip_allowlist": ["192.0.2.0/24"]},
                headers=keyed(behind_proxy, OFFICE),
            )
            assert_error(locked_out, 400, "would_lock_out")
        finally:
            restored = await client.patch(
                "/v1/workspace", json={"ip_allowlist": []}, headers=keyed(behind_proxy, OFFICE)
            )
            assert restored.status_code == 200, restored.text


async def test_ip_allowlist_untrusted_peer_forwarded_header_ignored_would_lock_out(
    exposed: ServeProcess,
) -> None:
    async with httpx.AsyncClient(base_url=exposed.http, timeout=10) as client:
        # The peer is 127.0.0.1 whatever the header says: an office-only list shuts it out.
        claimed = await client.patch(
            "/v1/workspace",
            json={"ip_allowlist": ["203.0.113.0/24"]},
            headers=keyed(exposed, OFFICE),
        )
        assert_error(claimed, 400, "would_lock_out")
        own = await client.patch(
            "/v1/workspace", json={"ip_allowlist": ["127.0.0.1"]}, headers=keyed(exposed, OFFICE)
        )
        assert own.status_code == 200, own.text
        try:
            assert (
                await client.get("/v1/agents", headers=keyed(exposed, ELSEWHERE))
            ).status_code == 200
            assert await handshake(exposed, ELSEWHERE) == (101, "")
        finally:
            await client.patch(
                "/v1/workspace", json={"ip_allowlist": []}, headers=keyed(exposed, OFFICE)
            )
