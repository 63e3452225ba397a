"""The webhook sender of `parley serve` (composition/webhook_sender.py): a process of its
own beside the server, started again when it dies, gone when the server is. Real processes
on embedded SQLite, a real receiver on loopback, signatures checked with `standardwebhooks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks

from tests.faults.serve_process import ServeProcess, alive, children_of
from tests.webhook_receiver import (
    Reply,
    WebhookReceiver,
    only_delivery,
    requests_reach,
    running_receiver,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SETTINGS: dict[str, Any] = {
    "PARLEY_DATABASE_URL": "sqlite:///parley.db",
    "PARLEY_OUTBOUND_ALLOW_HTTP": "true",
    "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS": "true",
    "PARLEY_INSTANCE_ID": "sender-fault",
}
SENDER = "webhook-sender"


async def one_sender(serve: ServeProcess, *, other_than: int | None = None) -> int:
    """The PID of the server's one sender (a new one, if `other_than` is given)."""
    for _ in range(300):
        senders = serve.children(SENDER)
        if len(senders) == 1 and senders[0] != other_than:
            return senders[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"senders of parley serve: {serve.children(SENDER)}")


async def gone(pid: int, seconds: float = 10) -> bool:
    for _ in range(int(seconds / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


def claimers(database: Path) -> list[str | None]:
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        return [row[0] for row in db.execute("SELECT claimed_by FROM webhook_deliveries")]


async def make_webhook(client: httpx.AsyncClient, receiver: WebhookReceiver) -> tuple[str, str]:
    made = await client.post(
        "/v1/webhooks", json={"url": receiver.url(), "event_types": ["agent.created"]}
    )
    assert made.status_code == 201, made.text
    return made.json()["webhook"]["id"], made.json()["secret"]


async def test_webhook_sender_runs_beside_serve_and_sends_its_deliveries(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **SETTINGS)
    with running_receiver() as receiver:
        try:
            serve.start()
            sender = await one_sender(serve)
            headers = {"Authorization": f"Bearer {serve.first_key}"}
            async with httpx.AsyncClient(base_url=serve.http, headers=headers) as client:
                _, secret = await make_webhook(client, receiver)
                for n in range(3):
                    created = await client.post("/v1/agents", json={"name": f"a{n}"})
                    assert created.status_code == 201, created.text
            await requests_reach(receiver, 3)
            names = set()
            for request in receiver.requests:
                event = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
                names.add(event["data"]["agent"]["name"])
            assert names == {"a0", "a1", "a2"}
            assert serve.children(SENDER) == [sender]
        finally:
            serve.ensure_stopped()


async def test_webhook_sender_killed_mid_send_is_started_again_and_delivers_once(
    tmp_path: Path,
) -> None:
    serve = ServeProcess(tmp_path, **SETTINGS)
    with running_receiver() as receiver:
        # The first attempt hangs at the receiver: the sender dies while it is in flight.
        receiver.script(Reply(delay_s=60), Reply.json({}))
        try:
            serve.start()
            sender = await one_sender(serve)
            headers = {"Authorization": f"Bearer {serve.first_key}"}
            async with httpx.AsyncClient(base_url=serve.http, headers=headers) as client:
                webhook_id, secret = await make_webhook(client, receiver)
                created = await client.post("/v1/agents", json={"name": "in-flight"})
                assert created.status_code == 201, created.text
                await requests_reach(receiver, 1)
                # The server's commit claimed it in the sender's name, which is sending it.
                assert claimers(tmp_path / "parley.db") == ["sender-fault/webhooks"]
                os.kill(sender, signal.SIGKILL)
                await one_sender(serve, other_than=sender)  # started again under its name
                await requests_reach(receiver, 2)
                first, second = receiver.requests[:2]
                assert first.headers["webhook-id"] == second.headers["webhook-id"]
                event = standardwebhooks.Webhook(secret).verify(second.body, second.headers)
                assert event["data"]["agent"]["name"] == "in-flight"
                delivery = await only_delivery(client, webhook_id)
                assert delivery["status"] == "delivered"
                assert delivery["id"] == json.loads(second.body)["id"]
                assert delivery["attempts"] == 1  # the attempt cut by the kill left no record
            await asyncio.sleep(1.0)  # a second send would have come by now
            assert len(receiver.requests) == 2
            assert "starting it again" in serve.output.read_text()
        finally:
            serve.ensure_stopped()


async def test_webhook_sender_ends_with_serve_killed_by_sigkill(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **SETTINGS)
    try:
        serve.start()
        sender = await one_sender(serve)
        assert serve.process is not None
        parent = serve.process.pid
        serve.kill()
        assert await gone(sender), "the sender outlived parley serve"
        assert not children_of(parent, SENDER)
    finally:
        serve.ensure_stopped()


async def test_webhook_sender_stops_with_serve_on_sigterm(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **SETTINGS)
    try:
        serve.start()
        sender = await one_sender(serve)
        started = time.monotonic()
        serve.terminate()
        assert serve.process is not None
        assert serve.process.returncode == 0
        assert await gone(sender, seconds=1), "the sender outlived parley serve"
        assert time.monotonic() - started < 15
        assert "starting it again" not in serve.output.read_text()
    finally:
        serve.ensure_stopped()


async def test_webhook_sender_stopped_with_the_whole_group_is_not_started_again(
    tmp_path: Path,
) -> None:
    """A process manager that stops the group (systemd's default) TERMs both at once."""
    serve = ServeProcess(tmp_path, **SETTINGS)
    try:
        serve.start()
        sender = await one_sender(serve)
        assert serve.process is not None
        os.kill(sender, signal.SIGTERM)
        serve.terminate()
        assert serve.process.returncode == 0
        assert await gone(sender, seconds=1)
        assert not children_of(serve.process.pid, SENDER)
        assert "starting it again" not in serve.output.read_text()
    finally:
        serve.ensure_stopped()
