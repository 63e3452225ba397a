"""Who picked up a call placed to someone (API.md section 15), as its session hears of it.

The carrier's asynchronous verdict reaches whichever instance it reaches
(services/outbound_calls.py stores it and announces it through the shared store:
services/answering.py); the call's session looks for it here. The welcome waits meanwhile
for the callee's first words (the engine holds it: `SessionConfig.hold_welcome`), so a
person who says "Hello?" is answered at once, without waiting for the verdict.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

from parley import engine
from parley.errors import Unavailable
from parley.services import answering
from parley.services.answering import Verdict
from parley.services.context import Context

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Callee:
    """What a call placed to someone does once the carrier says who picked up."""

    voicemail_message: str | None


POLL_SECONDS: Final = 0.25
"""How often a waiting call looks for the verdict: a machine's greeting is cut this soon."""


async def wait_for_verdict(ctx: Context, *, org_id: str, conversation_id: str) -> Verdict:
    """Return the verdict once it is announced (a store outage is waited out: the watchdog
    closes the socket if it lasts)."""
    while True:
        try:
            found = await answering.announced(ctx, org_id=org_id, conversation_id=conversation_id)
        except Unavailable:
            found = None
        if found is not None:
            log.info("call %s answered by a %s", conversation_id, found.value)
            return found
        await asyncio.sleep(POLL_SECONDS)


async def act_on(
    verdict: Verdict, live: engine.ConversationEngine, *, voicemail_message: str | None
) -> bool:
    """A person: the welcome, if still held. A machine: what the agent says is cut, the
    listener muted (the machine records: nothing it plays is a turn), the voicemail message
    said once (the engine ends the conversation after it). True when the call must end now:
    a fax, or a machine and no message. Raises EngineClosed."""
    if verdict is Verdict.PERSON:
        await live.release_welcome()
        return False
    await live.release_welcome(speak=False)
    await live.mute()
    await live.interrupt()
    if verdict is Verdict.MACHINE and voicemail_message:
        await live.say(voicemail_message, then_end=True)
        return False
    return True
