"""What ends a live socket from outside: expiry, revocation, the conversation ended."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from parley.errors import Unavailable
from parley.services import endings
from parley.services.context import Context
from parley.services.endings import Ending
from parley.services.live.handshake import Handshake, revocation_verdict

log = logging.getLogger(__name__)

WATCH_INTERVAL_SECONDS = 0.5
"""How often a live socket checks revocation, expiry and an ended conversation (< 2 s)."""
STORE_OUTAGE_SECONDS = 2.0
"""How long a live socket rides out an unreachable revocation store (API.md section 6's
bound on revocation) before it closes 1011."""


async def watch(
    ctx: Context, handshake: Handshake, conversation_id: Callable[[], str | None]
) -> Ending:
    """Return how the socket closes once it must (see the rules below).

    - a JWT's socket closes 1008 `token expired` once `exp` + 30 s passes (spec 5.4 rule 10);
    - a session token's socket closes 1008 within 2 s of its revocation (API.md section 6);
    - `POST /v1/conversations/{id}/end` closes the socket 1000 on whichever instance holds it;
    - a revocation store that stays unreachable for `STORE_OUTAGE_SECONDS` closes it 1011:
      a shorter outage is ridden out (new requests fail closed meanwhile), a longer one
      would let a revoked token's socket outlive the revocation bound.
    """
    outage_since: float | None = None
    while True:
        await asyncio.sleep(WATCH_INTERVAL_SECONDS)
        _stop_if_cancelled()
        if handshake.expires_at is not None and ctx.clock.time() > handshake.expires_at:
            return endings.TOKEN_EXPIRED
        try:
            verdict = await revocation_verdict(ctx, handshake, conversation_id())
        except Unavailable:
            _stop_if_cancelled()
            now = ctx.clock.monotonic()
            outage_since = outage_since if outage_since is not None else now
            if now - outage_since >= STORE_OUTAGE_SECONDS:
                log.warning("revocation store unreachable for %.1f s", now - outage_since)
                return endings.STORE_UNAVAILABLE
            continue
        outage_since = None
        if verdict is not None:
            return verdict


def _stop_if_cancelled() -> None:
    """Stop if this task was asked to: redis-py can swallow a cancellation that lands in the
    middle of a command (answering, or raising a timeout), and the loop would run on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
