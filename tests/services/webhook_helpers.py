"""Shared by the webhook tests: a services context without the server (so no worker runs
unless a test starts one), webhooks on a loopback receiver, and waiting with a bound."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

from parley.clock import SystemClock
from parley.composition.context import open_context
from parley.composition.options import RuntimeOptions
from parley.records import OPERATOR, IssuedWebhook
from parley.services import Context, webhooks
from tests import databases

TEST_SECRET_KEY = databases.TEST_SECRET_KEY


@asynccontextmanager
async def local_context(database_url: str, *, instance_id: str = "") -> AsyncIterator[Context]:
    """A services context whose outbound policy allows http and loopback (the receiver)."""
    options = RuntimeOptions(
        database_url=database_url,
        redis_url=None,
        default_audience="127.0.0.1",
        outbound_allow_http=True,
        outbound_allow_private_networks=True,
        secret_key=TEST_SECRET_KEY,
        instance_id=instance_id,
    )
    async with open_context(options, clock=SystemClock()) as ctx:
        yield ctx


async def make_webhook(
    ctx: Context, org_id: str, url: str, event_types: Sequence[str] | None = None
) -> IssuedWebhook:
    return await webhooks.create_webhook(
        ctx, org_id=org_id, url=url, event_types=event_types, description="", actor=OPERATOR
    )


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    """Poll `check` every 50 ms until it holds; fail after `seconds`."""
    for _ in range(int(seconds / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not true within {seconds} s")
