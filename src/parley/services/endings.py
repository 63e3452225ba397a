"""The one home of how a conversation ends (API.md sections 5, 8, 13 to 15).

An `Ending` is one way to end: who ended it (`ended_by`), the close code and reason its
socket closes with. Every way is named here, and every ender, whatever the path (the
socket, `POST …/end`, the dashboard, a sweep, an orphan's, a phone call's), calls
`end_conversation` with one of them: it stores the transition once (a guarded UPDATE:
of two enders racing, on any instance, one wins), writes `conversation.ended` once in that
transaction (services/events.py) and tells the instance holding the socket (the ended
marker on the shared store, read by every socket's watchdog: services/live/watchdog.py);
after the commit, the conversation stops counting against the caps on active
conversations (services/active_conversations.py).

    pending ──(socket's config: start_live)──> live
       │                                         │
       └──────────> end_conversation(ending) <───┘ ──> ended (ended_by, once)

Close codes are named here too (`CloseCode`): no bare number elsewhere (tests/test_endings.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum
from typing import Final

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.session import Session
from parley.errors import ConversationNotFound
from parley.records import Actor, EndedBy, Outcome, Status
from parley.services import active_conversations, audit, events, retention, revocations
from parley.services.context import Context
from parley.services.event_payloads import conversation_event_data

ENDED_MARKER_SECONDS = 300
"""How long the shared store remembers that a conversation ended: long enough for its socket,
wherever it is, to see it (watchdogs look every 0.5 s; a store outage longer than 2 s
closes sockets anyway), short enough that ended conversations do not pile up in it."""


class CloseCode(IntEnum):
    """WebSocket close codes (RFC 6455 section 7.4) the service closes with."""

    NORMAL = 1000
    GOING_AWAY = 1001
    """The server is shutting down (api/uvicorn_ws.py)."""
    INVALID_DATA = 1007
    """A text frame that is not UTF-8 (api/uvicorn_ws.py)."""
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    TRY_AGAIN_LATER = 1013
    """A dependency is unavailable; retry later (IANA registry)."""


@dataclass(frozen=True, slots=True)
class Ending:
    """One way a conversation ends: who ended it, and how its socket closes."""

    ended_by: EndedBy
    close_code: CloseCode
    reason: str


# The socket's own endings.
USER_HANGUP = Ending(EndedBy.USER, CloseCode.NORMAL, "")
"""The client sent `hangup`, the caller's `stop`, or the engine closed."""
CLIENT_CLOSED = Ending(EndedBy.USER, CloseCode.NORMAL, "")
"""The client (or the carrier) closed the socket."""
SHUTDOWN = Ending(EndedBy.SHUTDOWN, CloseCode.GOING_AWAY, "")
"""The server closed the socket as it shut down (1001 to the client)."""
ASSISTANT = Ending(EndedBy.ASSISTANT, CloseCode.NORMAL, "conversation ended")
"""The agent said goodbye (`natural_conversation_ending`)."""
CONFIG_TIMEOUT = Ending(EndedBy.TIMEOUT, CloseCode.POLICY_VIOLATION, "config timeout")
TOKEN_EXPIRED = Ending(EndedBy.TIMEOUT, CloseCode.POLICY_VIOLATION, "token expired")
"""A JWT's `exp` + 30 s passed (spec 5.4 rule 10)."""
TOKEN_REVOKED = Ending(EndedBy.API, CloseCode.POLICY_VIOLATION, "session token revoked")
MESSAGE_TOO_BIG = Ending(EndedBy.ERROR, CloseCode.MESSAGE_TOO_BIG, "message too big")
INTERNAL_ERROR = Ending(EndedBy.ERROR, CloseCode.INTERNAL_ERROR, "internal error")
STORE_UNAVAILABLE = Ending(EndedBy.ERROR, CloseCode.INTERNAL_ERROR, "revocation store unavailable")
SERVICE_UNAVAILABLE = Ending(EndedBy.ERROR, CloseCode.TRY_AGAIN_LATER, "service unavailable")
"""A dependency failed `config` (nothing went live)."""
AGENT_DISABLED = Ending(EndedBy.ERROR, CloseCode.POLICY_VIOLATION, "agent_disabled")
"""A disabled agent starts no conversation: its `config` is refused (API.md section 4)."""
ENDED_ELSEWHERE = Ending(EndedBy.API, CloseCode.NORMAL, "conversation ended")
"""How a socket closes once another ender ended its conversation (the ended marker); the
conversation keeps that ender's `ended_by`."""

# Endings from outside the socket.
API = Ending(EndedBy.API, CloseCode.NORMAL, "conversation ended")
"""`POST /v1/conversations/{id}/end`, or the dashboard's End."""
ORPHAN = Ending(EndedBy.SHUTDOWN, CloseCode.NORMAL, "conversation ended")
"""Its instance's lease ran out (killed, cut off): another instance ends it."""
INSTANCE_STOPPED = Ending(EndedBy.SHUTDOWN, CloseCode.GOING_AWAY, "")
"""Its own instance stops cleanly, with the conversation still live."""
STREAM_NEVER_STARTED = Ending(EndedBy.TIMEOUT, CloseCode.NORMAL, "conversation ended")
"""A phone call whose stream token expired unused (API.md section 13)."""
CALL_NEVER_LIVE = Ending(EndedBy.ERROR, CloseCode.POLICY_VIOLATION, "call never went live")
"""A call's stream was redeemed but its conversation could not go live (agent disabled
meanwhile, a store down): it must not stay `pending` with its token used up."""
REPLAY_NEVER_LIVE = Ending(EndedBy.ERROR, CloseCode.POLICY_VIOLATION, "replay never went live")
"""A replay (`conversations.replay`) whose conversation could not go live (its agent
disabled meanwhile, a store down): it must not stay `pending`."""

# Endings of section 15 (outbound calls, transfers, silence).
BUSY = Ending(EndedBy.BUSY, CloseCode.NORMAL, "conversation ended")
NO_ANSWER = Ending(EndedBy.NO_ANSWER, CloseCode.NORMAL, "conversation ended")
FAILED = Ending(EndedBy.FAILED, CloseCode.NORMAL, "conversation ended")
VOICEMAIL = Ending(EndedBy.VOICEMAIL, CloseCode.NORMAL, "conversation ended")
TRANSFERRED = Ending(EndedBy.TRANSFERRED, CloseCode.NORMAL, "conversation ended")
SILENCE_LIMIT = Ending(
    EndedBy.ASSISTANT_SILENCE_LIMIT_REACHED, CloseCode.NORMAL, "conversation ended"
)
CALL_COMPLETED = Ending(EndedBy.USER, CloseCode.NORMAL, "conversation ended")
"""The carrier reported the call `completed` before its stream ended (the callee hung up)."""
CALL_CANCELED = Ending(EndedBy.API, CloseCode.NORMAL, "conversation ended")
"""The carrier reported the call `canceled` (it was cancelled while it rang)."""
NEVER_CONNECTED = Ending(EndedBy.FAILED, CloseCode.NORMAL, "conversation ended")
"""A placed call the carrier never connected nor reported on (the housekeeping timer)."""
TRANSFER_LOST = Ending(EndedBy.TIMEOUT, CloseCode.NORMAL, "conversation ended")
"""A phone transfer the carrier told nothing more of (the housekeeping timer)."""

# Endings of section 17: the agent's configuration endpoint failed at the start (1011: the
# server could not start the conversation; the reason is the `ended_by`).
CONFIGURATION_ENDPOINT_TIMED_OUT = Ending(
    EndedBy.CONFIGURATION_ENDPOINT_TIMED_OUT,
    CloseCode.INTERNAL_ERROR,
    "configuration_endpoint_timed_out",
)
CONFIGURATION_ENDPOINT_ERROR = Ending(
    EndedBy.CONFIGURATION_ENDPOINT_ERROR, CloseCode.INTERNAL_ERROR, "configuration_endpoint_error"
)
CONFIGURATION_ENDPOINT_INVALID_RESPONSE = Ending(
    EndedBy.CONFIGURATION_ENDPOINT_INVALID_RESPONSE,
    CloseCode.INTERNAL_ERROR,
    "configuration_endpoint_invalid_response",
)
CONFIGURATION_ENDPOINT_FAILURES: Final = {
    ending.ended_by.value: ending
    for ending in (
        CONFIGURATION_ENDPOINT_TIMED_OUT,
        CONFIGURATION_ENDPOINT_ERROR,
        CONFIGURATION_ENDPOINT_INVALID_RESPONSE,
    )
}
"""Each ending by the code of the `ConfigurationEndpointFailed` error that decides it."""


def refused(code: str) -> Ending:
    """A `config` refused before the conversation went live (closes 1008 with the code)."""
    return Ending(EndedBy.ERROR, CloseCode.POLICY_VIOLATION, code)


POST_CALL_HANDOFF: Final = timedelta(seconds=30)
"""An ending makes its work after the call (services/post_call.py) due this far ahead: the
instance whose socket ran the conversation does it first; the timers, after that."""


def ended_marker(org_id: str, conversation_id: str) -> str:
    """The Revocations key that tells live sockets on every instance a conversation ended."""
    return f"conversation-ended:{org_id}:{conversation_id}"


async def end_conversation(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    ending: Ending,
    only_from: Status | None = None,
    measured: Outcome | None = None,
    actor: Actor | None = None,
    then: Callable[[Session], Awaitable[None]] | None = None,
) -> bool:
    """End a conversation by `ending`; True if this call ended it (False: it had ended, or
    is not `only_from`, or does not exist).

    In one transaction: the guarded transition (the first ender's `ended_by` stands),
    `conversation.ended` when this call ended it, and the ended marker for the socket of a
    conversation that was live. `measured`: the socket's own end, with what it measured
    (stored whoever ended it; no socket to tell). `actor`: an operation on request, audited
    (`conversation.end`); a missing conversation is then ConversationNotFound, and the
    marker is queued again (idempotent). `then`: more to write in the same transaction
    when this call ended it (a transfer's `conversation.transferred`).
    """
    async with ctx.db.transaction() as session:
        found = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if found is None:
            if actor is not None:
                raise ConversationNotFound()
            return False
        now = utcnow(ctx.clock)
        ended = (only_from is None or found.status == only_from) and await conversation_repo.end(
            session,
            org_id,
            conversation_id,
            at=now,
            ended_by=ending.ended_by,
            measured=measured,
            due=retention.due(found.retention, now),
            post_call_at=now + POST_CALL_HANDOFF,
        )
        if not ended and measured and (measured.latencies_ms or measured.interruptions_count):
            await conversation_repo.set_analysis(session, found, measured)  # ended elsewhere
        if ended:
            await _announce(session, ctx, org_id=org_id, conversation_id=conversation_id)
            if then is not None:
                await then(session)
        if actor is not None:
            await audit.record(
                session,
                ctx,
                org_id=org_id,
                actor=actor,
                action="conversation.end",
                target=conversation_id,
                details={"was": found.status},
            )
        tell = measured is None and (actor is not None or (ended and found.status == Status.LIVE))
        pending = (
            await revocations.queue(
                session,
                ctx,
                ended_marker(org_id, conversation_id),
                expires_at=ctx.clock.time() + ENDED_MARKER_SECONDS,
            )
            if tell
            else None
        )
    if pending is not None:
        await revocations.publish(ctx, pending)
    if ended:  # no longer active (API.md section 17): its lease on the caps given back
        await active_conversations.release(
            ctx, org_id=org_id, conversation_id=conversation_id, project_id=found.project_id
        )
    return ended


async def end_each(
    ctx: Context, found: Sequence[tuple[str, str]], ending: Ending, *, only_from: Status
) -> int:
    """End each (org, conversation) a sweep found, one transaction each (a conversation
    another ender took meanwhile is left to it); return how many this ended."""
    ended = 0
    for org_id, conversation_id in found:
        ended += await end_conversation(
            ctx,
            org_id=org_id,
            conversation_id=conversation_id,
            ending=ending,
            only_from=only_from,
        )
    return ended


async def _announce(session: Session, ctx: Context, *, org_id: str, conversation_id: str) -> None:
    """Write conversation.ended: the conversation as stored, with its items."""

    async def data() -> dict[str, object]:
        state = await conversation_repo.find(session, org_id, conversation_id)
        if state is None:  # deleted in this very transaction: nothing to show
            return {"conversation": None, "call_info": None}
        return conversation_event_data(await conversation_repo.load(session, state))

    await events.emit(session, ctx, org_id=org_id, event_type="conversation.ended", data=data)
