"""The audit trail: who changed what, as a tamper-evident hash chain per organization.

Rules:
1. Every change is recorded by `record` inside the transaction that makes it, so a change
   and its event commit or roll back together.
2. An event names its organization, actor (credential kind and ID, never a secret), action,
   target, time, client address and request ID, plus a few non-secret details.
3. Each organization's events form a chain: event N stores `prev_hash`, the hash of event
   N-1 (64 zeros for the first), and `hash` = SHA-256(prev_hash || canonical JSON of the
   event). The chain's head (last seq and hash) is stored too, so deleting the newest event
   shows as well.
4. Appending locks the organization's chain first (`db.repos.audit.lock_chain`), so two
   concurrent events never fork it. `record_guarded` appends in a transaction of its own
   only if a condition on another row still holds under the lock: on PostgreSQL in one
   statement (the lock, the hash by SQL's `sha256` over the canonical form split around
   its `seq`, the insert and the head's move), on SQLite in one thread hop.
5. `verify_chains` recomputes every chain and names the first bad event of each.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import audit as audit_repo
from parley.db.session import DirectConnection, Session
from parley.errors import InvalidCursor
from parley.records import Actor, AuditEvent, Page
from parley.services.context import DatabaseContext

GENESIS_HASH: Final = audit_repo.GENESIS_HASH
VERIFY_BATCH: Final = 500
ACTIONS: Final = frozenset(
    {
        "org.create",
        "workspace.update",
        "project.update",
        "agent.create",
        "agent.update",
        "agent.disable",
        "agent.enable",
        "agent.delete",
        "agent.release_numbers",
        "tool.create",
        "tool.update",
        "tool.delete",
        "external_storage_policy.create",
        "external_storage_policy.update",
        "external_storage_policy.delete",
        "extraction_schema.create",
        "extraction_schema.update",
        "extraction_schema.delete",
        "eval_prompt.create",
        "test_scenario.create",
        "test_scenario.update",
        "test_scenario.delete",
        "webhook.create",
        "webhook.update",
        "webhook.delete",
        "webhook.rotate_secret",
        "api_key.create",
        "api_key.revoke",
        "api_key.rename",
        "api_key.rotate",
        "api_key.grace_use",
        "session_token.create",
        "session_token.revoke",
        "conversation_token.create",
        "jwt.update",
        "jwt.refresh",
        "conversation.end",
        "conversation.outbound_call",
        "conversation.delete",
        "telephony.update",
        "telephony.delete",
        "dashboard.sign_in",
        "dashboard.sign_out",
        "dashboard.sign_in_failed",
    }
)


def canonical_form(event: AuditEvent) -> bytes:
    """Return the bytes that an event's hash covers: sorted, compact, UTF-8 JSON."""
    return _dumps(_canonical_body(event)).encode("utf-8")


def canonical_parts(event: AuditEvent) -> tuple[bytes, bytes]:
    """Return the canonical form split around its `seq` value: `before + str(seq) + after`
    is `canonical_form(event)`, so the database can hash an event whose `seq` (and
    `prev_hash`) it learns only under the chain's lock. The top-level keys sort around
    `seq`; each side is dumped on its own, so a `seq` inside `details` cannot confuse it."""
    body = _canonical_body(event)
    before = _dumps({key: value for key, value in body.items() if key < "seq"})
    after = _dumps({key: value for key, value in body.items() if key > "seq"})
    return (before[:-1] + ',"seq":').encode("utf-8"), ("," + after[1:]).encode("utf-8")


def _canonical_body(event: AuditEvent) -> dict[str, Any]:
    return {
        "org_id": event.org_id,
        "seq": event.seq,
        "action": event.action,
        "target": event.target,
        "actor": {"kind": event.actor_kind, "id": event.actor_id},
        "client": event.client,
        "request_id": event.request_id,
        "details": event.details,
        "created_at": event.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
    }


def _dumps(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(event: AuditEvent) -> str:
    """Return SHA-256(prev_hash || canonical form) of an event, in hex."""
    return hashlib.sha256(event.prev_hash.encode("ascii") + canonical_form(event)).hexdigest()


async def record(
    session: Session,
    ctx: DatabaseContext,
    *,
    org_id: str,
    actor: Actor,
    action: str,
    target: str,
    details: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Append an event to the organization's chain, inside the caller's transaction."""
    seq, prev_hash = await audit_repo.lock_chain(session, org_id)
    unhashed = _unhashed(ctx, org_id, actor, action, target, details, seq + 1, prev_hash)
    event = _with_hash(unhashed)
    await audit_repo.append(session, event)
    return event


async def record_many(
    session: Session,
    ctx: DatabaseContext,
    *,
    org_id: str,
    actor: Actor,
    entries: Sequence[tuple[str, str, Mapping[str, Any] | None]],
) -> None:
    """Append several events (action, target, details) to the organization's chain, in
    order, inside the caller's transaction: the chain locked once, one insert."""
    seq, prev_hash = await audit_repo.lock_chain(session, org_id)
    events = []
    for action, target, details in entries:
        seq += 1
        event = _with_hash(_unhashed(ctx, org_id, actor, action, target, details, seq, prev_hash))
        events.append(event)
        prev_hash = event.hash
    await audit_repo.append_many(session, events)


async def record_guarded(
    ctx: DatabaseContext,
    *,
    org_id: str,
    actor: Actor,
    action: str,
    details: Mapping[str, Any] | None = None,
    guard: audit_repo.Guard,
) -> AuditEvent | None:
    """Append an event about the guard's row (its target) as `record` would, in a
    transaction of its own, if the guard still finds the row once the chain is locked;
    return it, or None when the guard finds nothing or the chain has no head yet (nothing
    is written: the caller takes its locking path).

    On PostgreSQL one statement on an AUTOCOMMIT connection (`Database.autocommit()`),
    the hash computed by the database, the guard's row share-locked until its commit; on
    SQLite one thread hop of Core statements on the direct connection
    (`Database.write_core_directly`), no ORM session. Neither announces a change: the
    event is the only thing written."""
    unhashed = _unhashed(ctx, org_id, actor, action, "", details, 0, "")
    if audit_repo.appends_in_one_statement(ctx.db.dialect):
        before, _ = canonical_parts(unhashed)
        async with ctx.db.autocommit() as writer:
            appended = await audit_repo.append_guarded(writer, unhashed, before, guard)
    else:

        def append(core: DirectConnection) -> tuple[int, str, str, str] | None:
            return audit_repo.append_guarded_directly(core, unhashed, guard, chain_hash)

        appended = await ctx.db.write_core_directly(append)
    if appended is None:
        return None
    seq, prev_hash, hashed, target = appended
    written = {"seq": seq, "prev_hash": prev_hash, "hash": hashed, "target": target}
    return AuditEvent(**{**_fields(unhashed), **written})


def _unhashed(
    ctx: DatabaseContext,
    org_id: str,
    actor: Actor,
    action: str,
    target: str,
    details: Mapping[str, Any] | None,
    seq: int,
    prev_hash: str,
) -> AuditEvent:
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    return AuditEvent(
        org_id=org_id,
        seq=seq,
        action=action,
        target=target[:256],
        actor_kind=actor.kind,
        actor_id=actor.id,
        client=actor.client[:64] if actor.client else None,
        request_id=actor.request_id[:64] if actor.request_id else None,
        details=dict(details or {}),
        created_at=utcnow(ctx.clock),
        prev_hash=prev_hash,
        hash="",
    )


def _with_hash(event: AuditEvent) -> AuditEvent:
    return AuditEvent(**{**_fields(event), "hash": chain_hash(event)})


def _fields(event: AuditEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in AuditEvent.__slots__}


async def list_events(
    ctx: DatabaseContext,
    *,
    org_id: str,
    action: str | None,
    target: str | None,
    cursor: str | None,
    limit: int,
) -> Page[AuditEvent]:
    """List the organization's events, newest first, optionally by action and target."""
    before = _decode_cursor(cursor) if cursor is not None else None
    async with ctx.db.read() as session:
        events = await audit_repo.list_page(
            session, org_id, action=action, target=target, before_seq=before, limit=limit
        )
    if len(events) <= limit:
        return Page(items=events, next_cursor=None)
    return Page(items=events[:limit], next_cursor=_encode_cursor(events[limit - 1].seq))


def _encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"audit:{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode("ascii"))
        kind, _, seq = raw.decode("ascii").partition(":")
        if kind != "audit" or not seq.isdigit():
            raise ValueError(cursor)
        return int(seq)
    except (ValueError, binascii.Error, UnicodeError):
        raise InvalidCursor(param_errors={"cursor": "is not a cursor of this listing"}) from None


@dataclass(frozen=True, slots=True)
class BadEvent:
    """The first event at which a chain stops verifying, and why."""

    seq: int
    action: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The verdict on one organization's chain."""

    org_id: str
    events: int
    first_bad: BadEvent | None

    @property
    def ok(self) -> bool:
        return self.first_bad is None


async def verify_chains(ctx: DatabaseContext, *, org_id: str | None = None) -> list[ChainReport]:
    """Recompute the chain of one organization, or of every organization that has one."""
    async with ctx.db.read() as session:
        orgs = [org_id] if org_id is not None else await audit_repo.chained_orgs(session)
        return [await _verify_chain(session, org) for org in orgs]


async def _verify_chain(session: Session, org_id: str) -> ChainReport:
    expected_seq, prev_hash, count = 1, GENESIS_HASH, 0
    while True:
        batch = await audit_repo.chain_slice(
            session, org_id, after_seq=expected_seq - 1, limit=VERIFY_BATCH
        )
        for event in batch:
            count += 1
            problem = _check_link(event, expected_seq, prev_hash)
            if problem is not None:
                return ChainReport(org_id, count, BadEvent(event.seq, event.action, problem))
            expected_seq, prev_hash = event.seq + 1, event.hash
        if len(batch) < VERIFY_BATCH:
            break
    head = await audit_repo.head_of(session, org_id)
    last_seq = expected_seq - 1
    if head is None and last_seq == 0:
        return ChainReport(org_id, 0, None)
    if head is None or head != (last_seq, prev_hash):
        reason = (
            f"the chain ends at event {last_seq} but its recorded head is event "
            f"{head[0] if head else 'missing'}: the newest events were deleted or the head "
            "was altered"
        )
        return ChainReport(org_id, count, BadEvent(last_seq + 1, None, reason))
    return ChainReport(org_id, count, None)


def _check_link(event: AuditEvent, expected_seq: int, prev_hash: str) -> str | None:
    if event.seq != expected_seq:
        return f"events {expected_seq} to {event.seq - 1} are missing before this event"
    if event.prev_hash != prev_hash:
        return "its prev_hash does not match the event before it: an event was moved or replaced"
    if chain_hash(event) != event.hash:
        return "its content does not match its hash: the event was edited"
    return None
