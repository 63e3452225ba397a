"""What ends a live socket from outside: expiry, revocation, the conversation ended."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from parley.services import conversations
from parley.services.context import Context
from parley.services.live.handshake import Handshake

WATCH_INTERVAL_SECONDS = 0.5
"""How often a live socket checks revocation, expiry and an ended conversation (< 2 s)."""


async def watch(
    ctx: Context, handshake: Handshake, conversation_id: Callable[[], str | None]
) -> tuple[int, str]:
    """Return the close code and reason once the socket must close (see the rules below).

    - a JWT's socket closes 1008 `token expired` once `exp` + 30 s passes (spec 5.4 rule 10);
    - a session token's socket closes 1008 within 2 s of its revocation (API.md section 6);
    - `POST /v1/conversations/{id}/end` closes the socket 1000 on whichever instance holds it.
    """
    while True:
        await asyncio.sleep(WATCH_INTERVAL_SECONDS)
        if handshake.expires_at is not None and ctx.clock.time() > handshake.expires_at:
            return 1008, "token expired"
        if handshake.revocable_id is not None and await ctx.revocations.is_revoked(
            handshake.revocable_id
        ):
            return 1008, "session token revoked"
        current = conversation_id()
        if current is not None and await ctx.revocations.is_revoked(
            conversations.ended_marker(handshake.principal.org_id, current)
        ):
            return 1000, "conversation ended"
