"""Behind a reverse proxy (issue #22 item 5): with PARLEY_TRUSTED_PROXIES naming the proxy,
its `X-Forwarded-For` sets the client that the sign-in throttle, the audit trail and the
access log see, and its `X-Forwarded-Proto: https` makes the dashboard's cookies `Secure`;
without it (the default) those headers are ignored, whoever sends them.

A real `parley serve` is the proxy's upstream; the test plays the proxy on 127.0.0.1.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

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
