"""docs/webhooks.md's receiver, examples/webhooks/receiver.py, run as written: a subprocess
verifying real deliveries of the app (on loopback) with `standardwebhooks` and with `svix`,
and refusing a forged one."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ports import free_port
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).parents[2] / "examples" / "webhooks" / "receiver.py"


@pytest.fixture
def app_settings() -> dict[str, Any]:
    return {"outbound_allow_http": True, "outbound_allow_private_networks": True}


def started(secret: str, library: str, port: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(  # noqa: S603 - this interpreter, the example's arguments
        [sys.executable, str(EXAMPLE), "--port", str(port), "--library", library],
        env={"WEBHOOK_SECRET": secret, "PATH": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    assert "listening" in process.stderr.readline()
    return process


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.mark.parametrize("library", ["standardwebhooks", "svix"])
async def test_example_receiver_verifies_deliveries_and_refuses_forgeries(
    tenant: Tenant, make_agent: MakeAgent, port: int, library: str
) -> None:
    url = f"http://127.0.0.1:{port}/parley"
    made = await tenant.client.post("/v1/webhooks", json={"url": url})
    assert made.status_code == 201, made.text
    process = started(made.json()["secret"], library, port)
    try:
        async with httpx.AsyncClient() as outsider:
            forged = await outsider.post(
                url,
                content=b'{"id": "msg_x", "event_type": "agent.created", "data": {}}',
                headers={
                    "webhook-id": "msg_x",
                    "webhook-timestamp": str(int(time.time())),
                    "webhook-signature": "v1,bm90IGEgc2lnbmF0dXJl",
                    "svix-id": "msg_x",
                    "svix-timestamp": str(int(time.time())),
                    "svix-signature": "v1,bm90IGEgc2lnbmF0dXJl",
                },
            )
        assert forged.status_code == 401
        agent = await make_agent(tenant)
        assert process.stdout is not None
        # Read in a thread: the app delivering the event runs on this event loop.
        line = json.loads(await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 30))
        assert line["event_type"] == "agent.created"
        assert line["agent"] == agent["name"]
        assert line["id"].startswith("msg_")
    finally:
        process.terminate()
        process.communicate(timeout=10)  # reaps it and closes its pipes
