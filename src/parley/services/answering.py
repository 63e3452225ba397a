"""Who answered a placed call: the carrier's answering-machine verdict (API.md section 15).

The verdict (`AnsweredBy` of the asynchronous machine-detection callback) may reach any
instance, and the call's media stream runs on one of them: the verdict is stored with the
conversation (the first one stands) and announced through the shared store as a marker the
call's session looks for (services/live/callee.py), queued in the same transaction so a
store outage delays it but never loses it (services/revocations.py).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from parley.db.session import Session
from parley.services import revocations
from parley.services.context import Context, DatabaseContext

MARKER_SECONDS: Final = 3600
"""How long the shared store keeps a verdict: longer than any call waits for it."""

MACHINE_VALUES: Final = frozenset(
    {"machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other"}
)
KNOWN_VALUES: Final = MACHINE_VALUES | {"human", "unknown", "fax"}
"""Twilio's `AnsweredBy` values; anything else is refused (400)."""


class Verdict(StrEnum):
    """What a call's session does with it."""

    PERSON = "person"
    """`human` or `unknown`: the welcome, if the callee has not spoken yet."""
    MACHINE = "machine"
    """An answering machine: the voicemail message once, then hang up."""
    FAX = "fax"
    """Hang up."""


def verdict_of(answered_by: str) -> Verdict:
    if answered_by in MACHINE_VALUES:
        return Verdict.MACHINE
    return Verdict.FAX if answered_by == "fax" else Verdict.PERSON


def marker(org_id: str, conversation_id: str, verdict: Verdict) -> str:
    """The shared-store key announcing `verdict` for a call."""
    return f"call-answered-by-{verdict.value}:{org_id}:{conversation_id}"


async def queue_announcement(
    session: Session, ctx: DatabaseContext, *, org_id: str, conversation_id: str, verdict: Verdict
) -> revocations.Pending:
    """Queue the verdict's marker in the transaction that stores it; publish it after."""
    return await revocations.queue(
        session,
        ctx,
        marker(org_id, conversation_id, verdict),
        expires_at=ctx.clock.time() + MARKER_SECONDS,
    )


async def announced(ctx: Context, *, org_id: str, conversation_id: str) -> Verdict | None:
    """The verdict announced for a call, or None yet. Raises Unavailable (the store)."""
    for verdict in (Verdict.MACHINE, Verdict.FAX, Verdict.PERSON):
        if await ctx.revocations.is_revoked(marker(org_id, conversation_id, verdict)):
            return verdict
    return None
