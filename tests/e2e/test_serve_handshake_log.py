"""`parley serve`'s WebSocket handshakes: one access line each, no credential in any line,
and no per-message compression (docs/decisions.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from parley.jwt import generate_key_pair, mint_token
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AUDIENCE = "parley.test"
ISSUER = "https://tenant.example"


async def test_serve_logs_each_handshake_once_no_credential_no_compression(
    tmp_path: Path,
) -> None:
    serve = ServeProcess(
        tmp_path,
        PARLEY_DATABASE_URL="sqlite:///parley.db",
        PARLEY_PUBLIC_URL=f"https://{AUDIENCE}",
        PARLEY_LOG_LEVEL="info",
    )
    try:
        serve.start()
        keys = generate_key_pair("EdDSA")
        headers = {"Authorization": f"Bearer {serve.first_key}"}
        async with httpx.AsyncClient(base_url=serve.http, headers=headers) as api:
            registered = await api.put(
                "/v1/auth/jwt", json={"issuers": [ISSUER], "public_keys": keys.jwks["keys"]}
            )
            assert registered.status_code == 200, registered.text
        token = mint_token(
            keys.private_key_pem, kid=keys.kid, iss=ISSUER, aud=AUDIENCE, sub="user-1",
            conversation_id="conv_logged", jti="logged-once",
        )  # fmt: skip
        # The client offers permessage-deflate, as browsers do; the server declines it.
        async with connect(f"{serve.ws}/v1/sts/ws?jwt={token}") as ws:
            assert ws.response is not None
            assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        for _ in range(200):  # the accepted socket's line is written when its handler returns
            if '"WS /v1/sts/ws" 101' in serve.output.read_text():
                break
            await asyncio.sleep(0.02)
        with pytest.raises(InvalidStatus) as replayed:
            async with connect(f"{serve.ws}/v1/sts/ws?jwt={token}"):
                pass
        assert replayed.value.response.status_code == 409
        for _ in range(200):  # the access line is written when the handler returns
            if '"WS /v1/sts/ws" 409' in serve.output.read_text():
                break
            await asyncio.sleep(0.02)
    finally:
        serve.ensure_stopped()
    logged = serve.output.read_text()
    assert token not in logged
    assert token.split(".")[2] not in logged
    socket_lines = [line for line in logged.splitlines() if "/v1/sts/ws" in line]
    assert len(socket_lines) == 2, socket_lines  # one a handshake, accepted or refused
    assert '"WS /v1/sts/ws" 101' in socket_lines[0]
    assert '"WS /v1/sts/ws" 409' in socket_lines[1]
    for uvicorn_line in ("[accepted]", "connection open", "connection closed", "rejected"):
        assert uvicorn_line not in logged
