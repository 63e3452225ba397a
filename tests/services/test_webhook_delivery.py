"""The outbox worker's steps (claim, send, schedule), each alone, and the worker against a
real receiver on 127.0.0.1 whose requests are verified with the real `standardwebhooks`
and `svix` libraries; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import standardwebhooks
import svix.webhooks

from parley.clock import utcnow
from parley.db.repos import webhook_deliveries as delivery_repo
from parley.records import OPERATOR, WebhookPatch
from parley.services import Context, events, webhooks
from parley.services.outbox_bell import HANDOFF_BACKLOG, PICK_UP, POLL
from parley.services.webhook_delivery import (
    DEFAULT_RETRY_SCHEDULE,
    Attempt,
    DeliveryWorker,
    NextStep,
    WorkerOptions,
    claim,
    deliver,
    delivery_worker,
    parse_retry_after,
    prune,
    record,
    schedule,
    send,
)
from tests.factories import make_agent, make_org
from tests.services.webhook_helpers import eventually, local_context, make_webhook
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


@pytest.fixture
async def ctx(database_url: str) -> AsyncIterator[Context]:
    async with local_context(database_url) as context:
        yield context


async def one_event(ctx: Context, org_id: str, n: int = 1) -> None:
    """Write `n` agent.created events for the organization (one agent each)."""
    for _ in range(n):
        await make_agent(ctx, org_id)


# --- schedule ----------------------------------------------------------------------------


def test_schedule_success_is_delivered() -> None:
    step = schedule(Attempt(204), attempts_before=3, retry_schedule=(5,), now=NOW)
    assert (step.status, step.next_attempt_at, step.disable_webhook) == ("delivered", None, False)


@pytest.mark.parametrize("made", range(1, len(DEFAULT_RETRY_SCHEDULE) + 1))
def test_schedule_failure_waits_the_next_step_from_the_failed_attempt(made: int) -> None:
    step = schedule(
        Attempt(500), attempts_before=made - 1, retry_schedule=DEFAULT_RETRY_SCHEDULE, now=NOW
    )
    assert step.status == "pending"
    assert step.next_attempt_at == NOW + timedelta(seconds=DEFAULT_RETRY_SCHEDULE[made - 1])


def test_schedule_default_waits_match_the_api() -> None:
    assert DEFAULT_RETRY_SCHEDULE == (5, 300, 1800, 7200, 18000, 36000, 36000)


@pytest.mark.parametrize("outcome", [Attempt(500), Attempt(302), Attempt(None, error="time-out")])
def test_schedule_after_the_last_retry_is_failed(outcome: Attempt) -> None:
    # `1,2,3`: at most four attempts.
    assert schedule(outcome, attempts_before=2, retry_schedule=(1, 2, 3), now=NOW).status == (
        "pending"
    )
    assert schedule(outcome, attempts_before=3, retry_schedule=(1, 2, 3), now=NOW).status == (
        "failed"
    )


def test_schedule_410_fails_and_disables_the_webhook() -> None:
    step = schedule(Attempt(410), attempts_before=0, retry_schedule=(5,), now=NOW)
    assert (step.status, step.disable_webhook) == ("failed", True)


def test_schedule_retry_after_longer_than_the_step_wins() -> None:
    step = schedule(
        Attempt(429, retry_after_s=120), attempts_before=0, retry_schedule=(5,), now=NOW
    )
    assert step.next_attempt_at == NOW + timedelta(seconds=120)
    short = schedule(Attempt(503, retry_after_s=1), attempts_before=0, retry_schedule=(5,), now=NOW)
    assert short.next_attempt_at == NOW + timedelta(seconds=5)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 30.0),
        (" 7 ", 7.0),
        ("Wed, 25 Nov 2026 12:01:00 GMT", 60.0),
        ("Wed, 25 Nov 2026 11:00:00 GMT", 0.0),
        ("999999999999", 86_400.0),
        ("soon", None),
        ("-5", None),
        (None, None),
    ],
)
def test_parse_retry_after_seconds_or_date(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


# --- claim -------------------------------------------------------------------------------


async def test_claim_takes_each_due_delivery_once(ctx: Context, receiver: WebhookReceiver) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    await one_event(ctx, org.id, 3)
    first = await claim(ctx, limit=10)
    assert len(first) == 3
    assert await claim(ctx, limit=10) == []
    assert {due.url for due in first} == {receiver.url()}


async def test_claim_lease_ran_out_claims_again(ctx: Context, receiver: WebhookReceiver) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    await one_event(ctx, org.id)
    (claimed,) = await claim(ctx, limit=10, lease_s=2.0)  # long enough for a loaded claim
    assert await claim(ctx, limit=10) == []
    await asyncio.sleep(2.1)  # the claimer "died": its lease ends
    (again,) = await claim(ctx, limit=10)
    assert again.id == claimed.id


async def test_claim_limits_each_webhook(ctx: Context, receiver: WebhookReceiver) -> None:
    org = (await make_org(ctx)).org
    slow = await make_webhook(ctx, org.id, receiver.url("/slow"), ["agent.created"])
    fast = await make_webhook(ctx, org.id, receiver.url("/fast"), ["agent.created"])
    await one_event(ctx, org.id, 6)
    claimed = await claim(ctx, limit=20, per_webhook=2, in_flight={slow.webhook.id: 1})
    per = {
        w: sum(1 for d in claimed if d.webhook_id == w) for w in (slow.webhook.id, fast.webhook.id)
    }
    assert per == {slow.webhook.id: 1, fast.webhook.id: 2}


async def test_claim_skips_disabled_webhooks_and_future_rows(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    await one_event(ctx, org.id)
    await webhooks.update_webhook(
        ctx,
        org_id=org.id,
        webhook_id=issued.webhook.id,
        patch=WebhookPatch(is_disabled=True),
        actor=OPERATOR,
    )
    assert await claim(ctx, limit=10) == []
    await webhooks.update_webhook(
        ctx,
        org_id=org.id,
        webhook_id=issued.webhook.id,
        patch=WebhookPatch(is_disabled=False),
        actor=OPERATOR,
    )
    (due,) = await claim(ctx, limit=10)
    await deliver(ctx, due, retry_schedule=(60,))  # receiver: 200
    receiver.script(Reply.json({}, status=500))
    await one_event(ctx, org.id)
    (failing,) = await claim(ctx, limit=10)
    step = await deliver(ctx, failing, retry_schedule=(60,))
    assert step.status == "pending"
    assert await claim(ctx, limit=10) == []  # due in a minute


# --- send --------------------------------------------------------------------------------


async def test_send_signature_verifies_with_standardwebhooks_and_svix(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    assert (await send(ctx, due)).succeeded
    (request,) = receiver.requests
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    body = request.body.decode()
    standard = {
        k: request.headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")
    }
    svix_headers = {k: request.headers[k] for k in ("svix-id", "svix-timestamp", "svix-signature")}
    assert standardwebhooks.Webhook(issued.secret).verify(body, standard) == json.loads(body)
    svix.webhooks.Webhook(issued.secret).verify(body, svix_headers)  # raises unless it verifies
    assert request.headers["webhook-id"] == due.id == json.loads(body)["id"]
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 5
    payload = json.loads(body)
    assert set(payload) == {"id", "event_type", "created_at", "data"}
    assert payload["event_type"] == "agent.created"


async def test_send_after_rotation_signs_with_both_secrets(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    new_secret = await webhooks.rotate_secret(
        ctx, org_id=org.id, webhook_id=issued.webhook.id, actor=OPERATOR
    )
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    await send(ctx, due)
    (request,) = receiver.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (issued.secret, new_secret):
        standardwebhooks.Webhook(secret).verify(request.body.decode(), request.headers)
        svix.webhooks.Webhook(secret).verify(request.body.decode(), request.headers)
    # 24 h later the old secret no longer signs.
    later = replace(due, previous_secret_expires_at=utcnow(ctx.clock) - timedelta(seconds=1))
    await send(ctx, later)
    assert len(receiver.requests[1].headers["webhook-signature"].split(" ")) == 1
    svix.webhooks.Webhook(new_secret).verify(
        receiver.requests[1].body.decode(), receiver.requests[1].headers
    )


async def test_send_each_attempt_same_id_new_timestamp(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    await send(ctx, due)
    await asyncio.sleep(1.05)
    await send(ctx, due)
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == due.id
    assert first.body == second.body
    assert int(second.headers["webhook-timestamp"]) > int(first.headers["webhook-timestamp"])


async def test_send_redirect_is_a_failure_not_followed(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(Reply.redirect(receiver.url("/elsewhere")), Reply.json({}))
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    attempt = await send(ctx, due)
    assert attempt.status_code == 302
    assert not attempt.succeeded
    assert [r.path for r in receiver.requests] == ["/hook"]


@pytest.mark.parametrize(
    "reply",
    [
        Reply.huge(),
        Reply.huge(declare_length=False),
        Reply(body=gzip.compress(b'{"ok": true}'), headers={"Content-Encoding": "gzip"}),
        Reply(body=b"\x1f\x8b not even gzip", headers={"Content-Encoding": "br"}),
    ],
    ids=["declared_10mb", "streamed_10mb", "gzip", "compressed_garbage"],
)
async def test_send_2xx_is_success_whatever_its_body_bounded(
    ctx: Context, receiver: WebhookReceiver, reply: Reply
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(reply)
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    started = time.monotonic()
    attempt = await send(ctx, due)
    assert attempt.succeeded
    assert (attempt.status_code, attempt.error) == (200, None)
    assert time.monotonic() - started < 5
    assert receiver.bytes_sent < 10 * 1024 * 1024
    assert len(receiver.requests) == 1


async def test_send_non_2xx_with_10mb_body_still_fails_bounded(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(replace(Reply.huge(declare_length=False), status=500))
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    attempt = await send(ctx, due)
    assert attempt.status_code == 500
    assert not attempt.succeeded
    assert receiver.bytes_sent < 10 * 1024 * 1024


async def test_worker_2xx_with_large_body_delivered_once_not_resent(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(Reply(body=b"x" * (200 * 1024)))
    await one_event(ctx, org.id, n=3)

    async def all_delivered() -> bool:
        page = await webhooks.list_deliveries(
            ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
        )
        return len(page.items) == 3 and all(d.status == "delivered" for d in page.items)

    async with delivery_worker(ctx, WorkerOptions(retry_schedule=(1,), poll_interval_s=0.05)):
        await eventually(all_delivered)
    page = await webhooks.list_deliveries(
        ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
    )
    assert [d.attempts for d in page.items] == [1, 1, 1]
    assert len(receiver.requests) == 3


async def test_send_never_answering_receiver_is_bounded(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(Reply(delay_s=60))
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    started = time.monotonic()
    attempt = await send(ctx, due, timeout_s=0.5)
    assert attempt.status_code is None
    assert attempt.error
    assert time.monotonic() - started < 3


async def test_send_private_address_refused_without_the_switch(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    await one_event(ctx, org.id)
    (due,) = await claim(ctx, limit=10)
    strict = replace(
        ctx, outbound_policy=replace(ctx.outbound_policy, allow_private_networks=False)
    )
    attempt = await send(strict, due)
    assert attempt.status_code is None
    assert attempt.error
    assert receiver.requests == []


# --- the outbox in transactions ------------------------------------------------------------


async def test_rolled_back_change_writes_and_sends_nothing(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])

    async def data() -> dict[str, Any]:
        return {"agent": {"id": "agent_x"}}

    class Boom(Exception):
        pass

    written: list[int] = []

    async def change_that_fails() -> None:
        async with ctx.db.transaction() as session:
            written.append(
                await events.emit(
                    session, ctx, org_id=org.id, event_type="agent.created", data=data
                )
            )
            raise Boom

    with pytest.raises(Boom):
        await change_that_fails()
    assert written == [1]
    assert await claim(ctx, limit=10) == []
    page = await webhooks.list_deliveries(
        ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
    )
    assert page.items == []
    async with delivery_worker(ctx, WorkerOptions(poll_interval_s=0.05)):
        await asyncio.sleep(0.3)  # a few polls: nothing is due
    assert receiver.requests == []


async def test_prune_deletes_only_old_delivered_rows(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    now = utcnow(ctx.clock)
    old = now - timedelta(days=31)
    async with ctx.db.transaction() as session:
        for n, at in enumerate([old, old, old, now]):
            await delivery_repo.insert(
                session,
                msg_id=f"msg_{n:032x}",
                webhook_id=issued.webhook.id,
                org_id=org.id,
                event_type="agent.created",
                body="{}",
                now=at,
            )
    claimed = {due.id: due for due in await claim(ctx, limit=10)}
    outcomes = {
        0: ("delivered", Attempt(200)),
        1: ("failed", Attempt(500)),
        3: ("delivered", Attempt(200)),
    }
    for n, (status, attempt) in outcomes.items():
        await record(ctx, claimed[f"msg_{n:032x}"], attempt, NextStep(status), at=now)
    assert await prune(ctx) == 1
    page = await webhooks.list_deliveries(
        ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
    )
    assert sorted(d.status for d in page.items) == ["delivered", "failed", "pending"]
    assert "msg_" + "0" * 32 not in {d.id for d in page.items}


# --- the worker ----------------------------------------------------------------------------


async def test_worker_retries_on_the_schedule_until_delivered(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(Reply.json({}, status=500), Reply.json({}, status=502), Reply.json({}))
    async with delivery_worker(ctx, WorkerOptions(retry_schedule=(1, 1), poll_interval_s=0.1)):
        await one_event(ctx, org.id)

        async def delivered() -> bool:
            page = await webhooks.list_deliveries(
                ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
            )
            return page.items[0].status == "delivered"

        await eventually(delivered)
    (delivery,) = (
        await webhooks.list_deliveries(
            ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
        )
    ).items
    assert delivery.attempts == 3
    assert delivery.last_status_code == 200
    assert len(receiver.requests) == 3
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1


async def test_worker_gives_up_after_the_last_retry(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(Reply.json({}, status=500))
    async with delivery_worker(ctx, WorkerOptions(retry_schedule=(1,), poll_interval_s=0.1)):
        await one_event(ctx, org.id)

        async def failed() -> bool:
            page = await webhooks.list_deliveries(
                ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
            )
            return page.items[0].status == "failed"

        await eventually(failed)
    assert len(receiver.requests) == 2


async def test_worker_honours_retry_after(ctx: Context, receiver: WebhookReceiver) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    throttled = Reply(status=429, body=b"{}", headers={"Retry-After": "3"})
    receiver.script(throttled, Reply.json({}))
    async with delivery_worker(ctx, WorkerOptions(retry_schedule=(1,), poll_interval_s=0.1)):
        await one_event(ctx, org.id)

        async def two() -> bool:
            return len(receiver.requests) == 2

        await eventually(two, seconds=15)
    first, second = receiver.requests
    waited = int(second.headers["webhook-timestamp"]) - int(first.headers["webhook-timestamp"])
    assert waited >= 2  # whole seconds: at least 3 s passed, not the schedule's 1


async def test_worker_410_disables_the_webhook(ctx: Context, receiver: WebhookReceiver) -> None:
    org = (await make_org(ctx)).org
    issued = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    receiver.script(Reply.json({}, status=410))
    async with delivery_worker(ctx, WorkerOptions(retry_schedule=(1,), poll_interval_s=0.1)):
        await one_event(ctx, org.id)

        async def disabled() -> bool:
            found = await webhooks.get_webhook(ctx, org_id=org.id, webhook_id=issued.webhook.id)
            return found.is_disabled

        await eventually(disabled)
        await one_event(ctx, org.id)  # a disabled webhook receives no new event
    page = await webhooks.list_deliveries(
        ctx, org_id=org.id, webhook_id=issued.webhook.id, cursor=None, limit=10
    )
    assert [d.status for d in page.items] == ["failed"]
    assert len(receiver.requests) == 1


async def test_worker_slow_endpoint_delays_only_its_own_deliveries(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    with running_receiver() as slow:
        slow.script(Reply(delay_s=30))
        await make_webhook(ctx, org.id, slow.url(), ["agent.updated"])
        fast = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
        agent = await make_agent(ctx, org.id)  # one delivery to the fast endpoint
        async with ctx.db.transaction() as session:

            async def data() -> dict[str, Any]:
                return {"agent": {"id": agent.id}}

            for _ in range(20):
                await events.emit(
                    session, ctx, org_id=org.id, event_type="agent.updated", data=data
                )
        worker = DeliveryWorker(
            ctx, WorkerOptions(poll_interval_s=0.05, max_in_flight=8, per_webhook=2)
        )
        task = asyncio.create_task(worker.run())
        try:
            await one_event(ctx, org.id, 2)

            async def fast_done() -> bool:
                page = await webhooks.list_deliveries(
                    ctx, org_id=org.id, webhook_id=fast.webhook.id, cursor=None, limit=10
                )
                return all(d.status == "delivered" for d in page.items) and len(page.items) == 3

            started = time.monotonic()
            await eventually(fast_done, seconds=5)
            assert time.monotonic() - started < 3
            assert len(slow.requests) <= 2  # its per-webhook limit
        finally:
            task.cancel()
            await worker.stop()


async def test_worker_sends_a_committed_delivery_without_waiting_for_a_poll(
    ctx: Context, receiver: WebhookReceiver
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    async with delivery_worker(ctx, WorkerOptions(poll_interval_s=60)):
        await asyncio.sleep(0.2)  # past the worker's first poll: the next is a minute away
        started = time.monotonic()
        await one_event(ctx, org.id)

        async def arrived() -> bool:
            return len(receiver.requests) == 1

        await eventually(arrived, seconds=5)
        assert time.monotonic() - started < 2


async def test_hand_over_is_bounded_per_webhook_the_rest_waits_in_the_outbox(
    ctx: Context, receiver: WebhookReceiver, database_url: str
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    ctx.outbox_bell.take_here(ctx.instance.id)  # as while a worker runs (none does here)
    try:
        await one_event(ctx, org.id, HANDOFF_BACKLOG + 3)
    finally:
        ctx.outbox_bell.stop_taking()
    handed = ctx.outbox_bell.take()
    assert len(handed) == HANDOFF_BACKLOG
    async with local_context(database_url, instance_id="another") as other:
        left = await claim(other, limit=100, per_webhook=100)
    assert len(left) == 3
    assert not {due.id for due in left} & {due.id for due in handed}


# --- the webhook sender: a worker in a process of its own ---------------------------------


async def test_sender_picks_up_deliveries_claimed_in_its_name_at_a_ring(
    ctx: Context, receiver: WebhookReceiver, database_url: str
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    async with local_context(database_url, instance_id="host:1/webhooks") as sender:
        rings: list[str] = []

        def ring(kind: str) -> None:  # the doorbell, in memory
            rings.append(kind)
            sender.outbox_bell.ring(pick_up=kind == PICK_UP, poll=kind == POLL)

        ctx.outbox_bell.hand_to_sender("host:1/webhooks", ring)
        options = WorkerOptions(poll_interval_s=60, picks_up=True)
        async with delivery_worker(sender, options):
            await asyncio.sleep(0.2)  # past the worker's first poll: the next is a minute away
            async with ctx.db.read() as session:
                assert not await delivery_repo.claimed_for(
                    session, claimer="host:1/webhooks", now=utcnow(ctx.clock), excluding=(), limit=9
                )
            started = time.monotonic()
            await one_event(ctx, org.id, 3)

            async def arrived() -> bool:
                return len(receiver.requests) == 3

            await eventually(arrived, seconds=5)
            assert time.monotonic() - started < 2
        assert rings == [PICK_UP] * 3
    ids = {json.loads(r.body)["id"] for r in receiver.requests}
    assert len(ids) == 3  # each sent once


async def test_sender_picks_up_a_delivery_whose_ring_was_lost_at_its_poll(
    ctx: Context, receiver: WebhookReceiver, database_url: str
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    ctx.outbox_bell.hand_to_sender("host:2/webhooks", lambda _kind: None)  # rings lost
    await one_event(ctx, org.id)
    async with local_context(database_url, instance_id="host:2/webhooks") as sender:
        worker = DeliveryWorker(sender, WorkerOptions(poll_interval_s=60, picks_up=True))
        try:
            assert await worker.tick() == 0  # nothing unclaimed: the row is the sender's
            assert len(worker._known) == 1

            async def arrived() -> bool:
                return len(receiver.requests) == 1

            await eventually(arrived, seconds=5)

            async def recorded() -> bool:  # the answer is read after the receipt
                await worker.flush()
                return worker._known == {}

            await eventually(recorded, seconds=5)
        finally:
            await worker.stop()


async def test_sender_past_the_backlog_releases_the_rest_to_the_outbox(
    ctx: Context, receiver: WebhookReceiver, database_url: str
) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    ctx.outbox_bell.hand_to_sender("host:3/webhooks", lambda _kind: None)
    await one_event(ctx, org.id, HANDOFF_BACKLOG + 3)
    async with local_context(database_url, instance_id="host:3/webhooks") as sender:
        # Sends that never start (no room): what it takes only waits, as behind a slow endpoint.
        worker = DeliveryWorker(sender, WorkerOptions(max_in_flight=0, picks_up=True))
        assert await worker.pick_up() == HANDOFF_BACKLOG
        assert await worker.pick_up() == 0  # what it holds is not taken twice
        async with local_context(database_url, instance_id="another") as other:
            left = await claim(other, limit=100, per_webhook=100)
        assert len(left) == 3
        assert not {due.id for due in left} & set(worker._known)
        await worker.stop()


async def test_sender_mode_forwards_a_poll_ring_and_nothing_else(ctx: Context) -> None:
    rings: list[str] = []
    ctx.outbox_bell.hand_to_sender("host:4/webhooks", rings.append)
    ctx.outbox_bell.ring()
    ctx.outbox_bell.ring(poll=True)
    assert rings == [POLL]
    assert ctx.outbox_bell.accepts("wh_any")
    assert not await ctx.outbox_bell.wait(0.01)  # this process's worker is not woken


async def test_sender_holds_a_fast_endpoints_burst_and_releases_past_a_slow_ones_bound(
    ctx: Context, receiver: WebhookReceiver, database_url: str
) -> None:
    org = (await make_org(ctx)).org
    fast = await make_webhook(ctx, org.id, receiver.url(), ["agent.created"])
    with running_receiver() as other:
        slow = await make_webhook(ctx, org.id, other.url(), ["agent.created"])
        ctx.outbox_bell.hand_to_sender("host:5/webhooks", lambda _kind: None)
        await one_event(ctx, org.id, 30)  # 30 deliveries to each
        async with local_context(database_url, instance_id="host:5/webhooks") as sender:
            worker = DeliveryWorker(sender, WorkerOptions(max_in_flight=0, picks_up=True))
            # As measured by earlier sends: 5 ms clears thousands within a lease, 15 s
            # (time-outs) clears a few.
            worker._send_seconds.update({fast.webhook.id: 0.005, slow.webhook.id: 15.0})
            assert await worker.pick_up() == 30 + HANDOFF_BACKLOG
            held = worker._held()
            assert (held[fast.webhook.id], held[slow.webhook.id]) == (30, HANDOFF_BACKLOG)
            async with local_context(database_url, instance_id="another") as third:
                left = await claim(third, limit=100, per_webhook=100)
            assert {due.webhook_id for due in left} == {slow.webhook.id}
            assert len(left) == 30 - HANDOFF_BACKLOG
            await worker.stop()
