"""Nothing lost (API.md section 14): `parley serve` killed with SIGKILL after a change
committed and before its delivery completed, then restarted, delivers the event, signed
with the same `webhook-id`. A real process on embedded SQLite, a real receiver on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks

from tests.faults.serve_process import ServeProcess
from tests.webhook_receiver import (
    Reply,
    only_delivery,
    requests_reach,
    running_receiver,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SETTINGS: dict[str, Any] = {
    "PARLEY_DATABASE_URL": "sqlite:///parley.db",
    "PARLEY_OUTBOUND_ALLOW_HTTP": "true",
    "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS": "true",
    "PARLEY_INSTANCE_ID": "webhook-fault",
}


async def test_kill_9_before_delivery_then_restart_delivers_the_event(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **SETTINGS)
    with running_receiver() as receiver:
        # The first attempt hangs at the receiver: the process dies while it is in flight,
        # so no 2xx ever reached it and nothing was recorded.
        receiver.script(Reply(delay_s=60), Reply.json({}))
        try:
            serve.start()
            assert serve.first_key is not None
            headers = {"Authorization": f"Bearer {serve.first_key}"}
            async with httpx.AsyncClient(base_url=serve.http, headers=headers) as client:
                made = await client.post(
                    "/v1/webhooks", json={"url": receiver.url(), "event_types": ["agent.created"]}
                )
                assert made.status_code == 201, made.text
                webhook_id, secret = made.json()["webhook"]["id"], made.json()["secret"]
                created = await client.post("/v1/agents", json={"name": "after-commit"})
                assert created.status_code == 201, created.text
            await requests_reach(receiver, 1)
            serve.kill()

            serve.start()  # same port, same instance: its earlier claims are released
            await requests_reach(receiver, 2)
            first, second = receiver.requests[:2]
            assert first.headers["webhook-id"] == second.headers["webhook-id"]
            event = standardwebhooks.Webhook(secret).verify(second.body.decode(), second.headers)
            assert event["event_type"] == "agent.created"
            assert event["data"]["agent"]["name"] == "after-commit"
            async with httpx.AsyncClient(base_url=serve.http, headers=headers) as client:
                delivery = await only_delivery(client, webhook_id)
            assert delivery["status"] == "delivered"
            assert delivery["id"] == json.loads(second.body)["id"]
            assert delivery["attempts"] == 1  # the attempt cut by the kill left no record
        finally:
            serve.ensure_stopped()
