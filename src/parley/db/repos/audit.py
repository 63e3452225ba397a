"""The audit trail: events in per-organization hash chains, and each chain's head."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import (
    Connection,
    LargeBinary,
    TextClause,
    bindparam,
    insert,
    select,
    text,
    union,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.database import mark_changed
from parley.db.session import StatementConnection, StatementWriter
from parley.db.tables import AuditEventRow, AuditHeadRow, OrganizationRow
from parley.records import AuditEvent

GENESIS_HASH = "0" * 64
"""The `prev_hash` of an organization's first event."""


def to_record(row: AuditEventRow) -> AuditEvent:
    return AuditEvent(
        org_id=row.org_id,
        seq=row.seq,
        action=row.action,
        target=row.target,
        actor_kind=row.actor_kind,
        actor_id=row.actor_id,
        client=row.client,
        request_id=row.request_id,
        details=dict(row.details or {}),
        created_at=row.created_at,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


async def lock_chain(session: AsyncSession, org_id: str) -> tuple[int, str]:
    """Lock the organization's chain for this transaction; return its head (seq, hash).

    One statement once the chain has a head (issue #23): `SELECT … FOR UPDATE` of the head
    row, so two events of one organization queue instead of forking the chain, and the one
    that waited reads the head the other committed (PostgreSQL re-reads a locked row that
    changed meanwhile; it would not re-read an unlocked row joined to a locked one). A chain
    without a head locks the organization's row (`FOR NO KEY UPDATE`: no conflict with the
    `KEY SHARE` locks of foreign keys, so no deadlock with them), then reads the head. SQLite
    renders no lock: its transactions already begin `IMMEDIATE` (one writer at a time).
    """
    head = (await session.execute(_LOCK_HEAD, {"org_id": org_id})).first()
    if head is not None:
        return head[0], head[1]
    await session.execute(
        select(OrganizationRow.id)
        .where(OrganizationRow.id == org_id)
        .with_for_update(key_share=True)
    )
    found = await head_of(session, org_id)
    return found if found is not None else (0, GENESIS_HASH)


async def head_of(session: AsyncSession, org_id: str) -> tuple[int, str] | None:
    """Return the recorded head (seq, hash) of the organization's chain, if any."""
    row = (
        await session.execute(
            select(AuditHeadRow.seq, AuditHeadRow.hash).where(AuditHeadRow.org_id == org_id)
        )
    ).first()
    return (row[0], row[1]) if row is not None else None


async def append(session: AsyncSession, event: AuditEvent) -> None:
    """Insert an event and move the chain's head to it (the chain must be locked).

    Two Core statements and no ORM flush: the head row exists unless this is the chain's
    first event (`lock_chain` read it in this transaction). The head's `seq` is the
    organization's generation (`generation_of`): the commit tells the read model too.
    """
    await append_many(session, [event])


async def append_many(session: AsyncSession, events: Sequence[AuditEvent]) -> None:
    """`append` for consecutive events of one organization's chain (locked): one insert of
    them all, and the head moved once, to the last."""
    if not events:
        return
    first, last = events[0], events[-1]
    mark_changed(session, last.org_id)
    rows = [
        {
            **_described(event),
            "seq": event.seq,
            "target": event.target,
            "prev_hash": event.prev_hash,
            "hash": event.hash,
        }
        for event in events
    ]
    await session.execute(_INSERT_EVENT, rows[0] if len(rows) == 1 else rows)
    if first.seq > 1:
        moved = await session.execute(
            _MOVE_HEAD, {"head_org_id": last.org_id, "new_seq": last.seq, "new_hash": last.hash}
        )
        if _rowcount(moved) == 1:
            return
    head = {"org_id": last.org_id, "seq": last.seq, "hash": last.hash}
    await session.execute(insert(AuditHeadRow).values(**head))


# The statements of every audited change, built once with bound parameters, so that their
# cache keys are computed once (building them cost a tenth of a disable's CPU, in the
# writer's turn: docs/performance.md).
_LOCK_HEAD = (
    select(AuditHeadRow.seq, AuditHeadRow.hash)
    .where(AuditHeadRow.org_id == bindparam("org_id"))
    .with_for_update()
)
_INSERT_EVENT = insert(AuditEventRow)
_MOVE_HEAD = (
    update(AuditHeadRow)
    .where(AuditHeadRow.org_id == bindparam("head_org_id"))
    .values(seq=bindparam("new_seq"), hash=bindparam("new_hash"))
    .execution_options(synchronize_session=False)  # no head is ever loaded as an object
)


@dataclass(frozen=True, slots=True)
class Guard:
    """The row an event of `append_guarded` is about, and a condition on it: `query`, a
    `SELECT` of one row whose one column `target` is the event's target, finds it only
    while the condition holds; `lock`, its `FOR SHARE` clause (PostgreSQL); `params`, its
    bound values."""

    query: str
    lock: str
    params: Mapping[str, object]


def appends_in_one_statement(dialect: str) -> bool:
    """Whether `append_guarded` runs on this dialect: PostgreSQL. SQLite has no `sha256`
    and one writer at a time: `append_guarded_directly` is its counterpart."""
    return dialect == "postgresql"


async def append_guarded(
    writer: StatementWriter, event: AuditEvent, before: bytes, guard: Guard
) -> tuple[int, str, str, str] | None:
    """Append `event` about the guard's row at the chain's head in one statement; return
    the (seq, prev_hash, hash, target) written, or None (nothing written) when the guard
    finds no row or the chain has no head yet.

    The statement share-locks the guard's row, locks the head (`FOR UPDATE`: a concurrent
    append waits, then this one reads the head it committed: READ COMMITTED re-reads a
    locked row that changed, and re-checks the guard's), inserts the event with `seq` =
    head + 1, `target` = the guard's `target` and `hash` = SHA-256(prev_hash || before ||
    seq || `,"target":` JSON string `}`), computed by PostgreSQL (`before` is the
    canonical form up to `seq`: services/audit.py; `target`, the last key, is rendered by
    `to_json`, which escapes a string as `json.dumps` does), and moves the head. It
    changes no other data, so it announces nothing to the read model. Run by
    `Database.autocommit()`, the locks are held for this statement only
    (docs/performance.md). `event`'s own `seq`, `target`, `prev_hash` and `hash` are ignored.
    """
    params = {**guard.params, **_described(event), "before": before}
    row = (await writer.execute(_guarded_append(f"{guard.query} {guard.lock}"), params)).first()
    if row is None:
        return None
    # Not `mark_changed`: the statement writes the trail only, and the guard's row is as
    # it was, so no copy of the organization's data is stale and there is nothing to
    # announce (services/read_model.py rule 2). The generation it moves is still seen by
    # the read model's check (rule 4), which then reloads copies that were right.
    seq, prev_hash, hashed, target = tuple(row)
    return seq, prev_hash, hashed, target


def append_guarded_directly(
    core: Connection,
    event: AuditEvent,
    guard: Guard,
    hash_of: Callable[[AuditEvent], str],
) -> tuple[int, str, str, str] | None:
    """SQLite's `append_guarded`, on a synchronous connection inside one transaction
    (`Database.write_core_directly`: `BEGIN IMMEDIATE`, so this process's writer alone):
    the guard, the head, the event at `seq` = head + 1 hashed by `hash_of` (the chain's
    hash), and the head's move, as Core statements built once. It too announces nothing.
    Returns what `append_guarded` returns."""
    found = core.execute(_guard_query(guard.query), dict(guard.params)).first()
    if found is None:
        return None
    head = core.execute(_LOCK_HEAD, {"org_id": event.org_id}).first()
    if head is None:
        return None
    placed = replace(event, seq=head[0] + 1, target=found[0], prev_hash=head[1])
    hashed = hash_of(placed)
    values = {"seq": placed.seq, "target": placed.target, "prev_hash": placed.prev_hash}
    core.execute(_INSERT_EVENT, {**_described(event), **values, "hash": hashed})
    moved = {"head_org_id": event.org_id, "new_seq": placed.seq, "new_hash": hashed}
    core.execute(_MOVE_HEAD, moved)
    return placed.seq, placed.prev_hash, hashed, placed.target


@functools.cache  # one per guard's query: a handful, built once
def _guard_query(query: str) -> TextClause:
    return text(query)


@functools.cache  # one per guard's query
def _guarded_append(guard_query: str) -> TextClause:
    """The one-statement append under `guard_query`, built once per guard."""
    events = AuditEventRow.__table__.c
    return text(_GUARDED_APPEND.format(guard=guard_query)).bindparams(
        bindparam("details", type_=events.details.type),
        bindparam("created_at", type_=events.created_at.type),
        bindparam("before", type_=LargeBinary()),
    )


# Written as SQL, not Core: data-modifying CTEs feeding an UPDATE … FROM read plainer so.
_GUARDED_APPEND = """\
WITH guard AS ({guard}),
head AS (
    SELECT audit_heads.seq, audit_heads.hash, guard.target
    FROM audit_heads, guard
    WHERE audit_heads.org_id = :org_id
    FOR UPDATE OF audit_heads
),
event AS (
    INSERT INTO audit_events (org_id, seq, action, target, actor_kind, actor_id, client,
                              request_id, details, created_at, prev_hash, hash)
    SELECT :org_id, head.seq + 1, :action, head.target, :actor_kind, :actor_id, :client,
           :request_id, :details, :created_at, head.hash,
           encode(sha256(convert_to(head.hash, 'UTF8') || :before
                         || convert_to((head.seq + 1)::text || ',"target":'
                                       || to_json(head.target)::text || '}}', 'UTF8')),
                  'hex')
    FROM head
    RETURNING seq, prev_hash, hash, target
)
UPDATE audit_heads SET seq = event.seq, hash = event.hash
FROM event
WHERE audit_heads.org_id = :org_id
RETURNING event.seq, event.prev_hash, event.hash, event.target"""


def _described(event: AuditEvent) -> dict[str, object]:
    """An event's columns that do not depend on its place in the chain."""
    return {
        "org_id": event.org_id,
        "action": event.action,
        "actor_kind": event.actor_kind,
        "actor_id": event.actor_id,
        "client": event.client,
        "request_id": event.request_id,
        "details": dict(event.details),
        "created_at": event.created_at,
    }


def _rowcount(result: object) -> int:
    count: int = getattr(result, "rowcount", 0)
    return count


_GENERATION = select(AuditHeadRow.seq).where(AuditHeadRow.org_id == bindparam("org_id"))


async def generation_of(connection: StatementConnection, org_id: str) -> int:
    """Return the organization's generation: its chain's last `seq` (0 before any event).

    Every change is audited in its own transaction (services/audit.py rule 1), so the
    number grows with each committed change of the organization; one statement, built once.
    """
    seq: int | None = (await connection.execute(_GENERATION, {"org_id": org_id})).scalar()
    return seq or 0


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    action: str | None,
    target: str | None,
    before_seq: int | None,
    limit: int,
) -> list[AuditEvent]:
    """Return up to `limit` + 1 events, newest first, older than `before_seq` if given."""
    query = select(AuditEventRow).where(AuditEventRow.org_id == org_id)
    if action is not None:
        query = query.where(AuditEventRow.action == action)
    if target is not None:
        query = query.where(AuditEventRow.target == target)
    if before_seq is not None:
        query = query.where(AuditEventRow.seq < before_seq)
    query = query.order_by(AuditEventRow.seq.desc()).limit(limit + 1)
    return [to_record(row) for row in await session.scalars(query)]


async def chain_slice(
    session: AsyncSession, org_id: str, *, after_seq: int, limit: int
) -> Sequence[AuditEvent]:
    """Return the events after `after_seq` in chain order (by seq), at most `limit`."""
    query = (
        select(AuditEventRow)
        .where(AuditEventRow.org_id == org_id, AuditEventRow.seq > after_seq)
        .order_by(AuditEventRow.seq)
        .limit(limit)
    )
    return [to_record(row) for row in await session.scalars(query)]


async def chained_orgs(session: AsyncSession) -> list[str]:
    """Return every organization that has events or a recorded head, sorted."""
    query = union(select(AuditEventRow.org_id), select(AuditHeadRow.org_id))
    return sorted(str(org_id) for org_id in (await session.scalars(query)))
