"""No conversation outlives the process that served it; no `jti` works twice across a
restart; SIGTERM ends every conversation cleanly (issue #9, findings 1, 2 and 9).

Each test runs `parley serve` as a real process on embedded SQLite, and kills, stops or
restarts it as a power cut or an operator would.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from parley.jwt import generate_key_pair, mint_token
from tests.faults.serve_process import ServeProcess
from tests.faults.ws_client import configure, make_agent, still_talks, until_closed

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AUDIENCE = "parley.test"
DATABASE = {
    "PARLEY_DATABASE_URL": "sqlite:///parley.db",
    "PARLEY_PUBLIC_URL": f"https://{AUDIENCE}",
}


def api(serve: ServeProcess, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=serve.http, headers={"Authorization": f"Bearer {key}"})


async def open_live(serve: ServeProcess, key: str, agent: str) -> tuple[object, str]:
    ws = await connect(
        f"{serve.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {key}"}
    )
    conversation_id = await configure(ws, agent)
    await ws.send('{"type": "generate_reply", "user_message": "Remember me."}')
    await still_talks(ws)
    return ws, conversation_id


async def conversation(serve: ServeProcess, key: str, conversation_id: str) -> dict[str, object]:
    async with api(serve, key) as client:
        answer = await client.get(f"/v1/conversations/{conversation_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, object] = answer.json()["conversation"]
    return found


async def test_kill_9_then_restart_ends_orphaned_conversation_at_once(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **DATABASE)
    try:
        serve.start()
        assert serve.first_key is not None
        key = serve.first_key
        agent = await make_agent(serve.http, key)
        ws, conversation_id = await open_live(serve, key, agent)
        assert (await conversation(serve, key, conversation_id))["status"] == "live"
        serve.kill()
        serve.start()  # same host and port: the same instance, in its next life
        ended = await conversation(serve, key, conversation_id)
        assert ended["status"] == "ended"
        assert ended["ended_at"] is not None
        assert ended["ended_by"] == "shutdown"
        assert any(item["text"] == "Remember me." for item in ended["items"])  # type: ignore[attr-defined]
        with pytest.raises(InvalidStatus) as refused:
            await connect(
                f"{serve.ws}/v1/sts/ws?conversation_id={conversation_id}",
                additional_headers={"Authorization": f"Bearer {key}"},
            )
        assert refused.value.response.status_code == 409
        await ws.close()  # type: ignore[attr-defined]
    finally:
        serve.ensure_stopped()


async def test_kill_9_orphan_ended_by_another_instance_on_a_timer(tmp_path: Path) -> None:
    lease = {"PARLEY_CONVERSATION_LEASE_SECONDS": "2"}
    first = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="first", **lease, **DATABASE)
    second = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="second", **lease, **DATABASE)
    try:
        first.start()
        assert first.first_key is not None
        key = first.first_key
        agent = await make_agent(first.http, key)
        second.start()  # another instance on the same database, already running
        ws, conversation_id = await open_live(first, key, agent)
        first.kill()
        started = time.monotonic()
        while (await conversation(second, key, conversation_id))["status"] == "live":
            assert time.monotonic() - started < 10, "the orphan stayed live"
            await asyncio.sleep(0.2)
        waited = time.monotonic() - started
        assert waited >= 1.0  # not before the lease ran out
        assert (await conversation(second, key, conversation_id))["ended_by"] == "shutdown"
        await ws.close()  # type: ignore[attr-defined]
    finally:
        first.ensure_stopped()
        second.ensure_stopped()


async def test_jti_used_before_restart_refused_after_it(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **DATABASE)
    try:
        serve.start()
        assert serve.first_key is not None
        keys = generate_key_pair("EdDSA")
        async with api(serve, serve.first_key) as client:
            registered = await client.put(
                "/v1/auth/jwt",
                json={"issuers": ["https://tenant.example"], "public_keys": keys.jwks["keys"]},
            )
            assert registered.status_code == 200, registered.text
        token = mint_token(
            keys.private_key_pem, kid=keys.kid, iss="https://tenant.example", aud=AUDIENCE,
            sub="user-1", conversation_id="c1", jti="only-once",
        )  # fmt: skip
        bearer = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=serve.http) as client:
            first_use = await client.get("/v1/conversations/c1", headers=bearer)
        assert first_use.status_code in (200, 404), first_use.text  # 404: not started yet
        serve.kill()
        serve.start()
        async with httpx.AsyncClient(base_url=serve.http) as client:
            again = await client.get("/v1/conversations/c1", headers=bearer)
        assert again.status_code == 409, again.text
        assert again.json()["error"]["code"] == "jti_replayed"
    finally:
        serve.ensure_stopped()


async def test_sigterm_stops_within_5s_closing_sockets_1001_and_ending_conversations(
    tmp_path: Path,
) -> None:
    serve = ServeProcess(tmp_path, **DATABASE)
    try:
        serve.start()
        assert serve.first_key is not None
        key = serve.first_key
        agent = await make_agent(serve.http, key)
        opened = [await open_live(serve, key, agent) for _ in range(3)]
        closing = [asyncio.create_task(until_closed(ws, within=10)) for ws, _ in opened]  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
        took = await asyncio.to_thread(serve.terminate)
        codes = await asyncio.gather(*closing)
        assert took < 5, f"SIGTERM took {took:.1f} s"
        assert [code for code, _ in codes] == [1001, 1001, 1001], codes
        with sqlite3.connect(tmp_path / "parley.db") as db:
            statuses = {
                conversation_id: db.execute(
                    "SELECT status, ended_by FROM conversations WHERE id = ?", (conversation_id,)
                ).fetchone()
                for _, conversation_id in opened
            }
        assert set(statuses.values()) == {("ended", "shutdown")}, statuses
        for ws, _ in opened:
            await ws.close()  # type: ignore[attr-defined]
    finally:
        serve.ensure_stopped()
