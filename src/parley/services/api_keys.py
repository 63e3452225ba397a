"""API keys: everything in their organization; shown once, stored as hashes.

Rules (API.md sections 2 and 17):
1. A key's secret is shown once, at creation or rotation; only its SHA-256 is stored.
2. Revoking a key stops it on the next request, on every instance (services/revocations.py).
3. Rotating a key gives it a new secret that works at once. The secret it replaces stops at
   once, or, with `grace_seconds` (0 to 86,400), works that much longer; a rotation without
   grace also ends the grace of every secret replaced before (the way to shut out a leaked
   key). Each use of a replaced secret is counted (services/grace_uses.py) and written to
   the audit trail as `api_key.grace_use` events.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from parley import credentials
from parley.clock import utcnow
from parley.db.repos import api_keys as key_repo
from parley.db.repos import dashboard_sessions as session_repo
from parley.db.session import Session
from parley.errors import ApiKeyNotFound, Forbidden, ValidationFailed
from parley.ids import new_id
from parley.records import SYSTEM, Actor, ApiKey, IssuedApiKey, Page
from parley.services import audit, revocations
from parley.services.context import Context, DatabaseContext
from parley.services.credential_cache import CACHE_SECONDS
from parley.services.paging import page_of
from parley.text import is_label

MAX_NAME_LENGTH = 100
NAME_RULE = f"must be 1 to {MAX_NAME_LENGTH} characters, without control characters"
MAX_GRACE_SECONDS = 86_400
GRACE_RULE = f"must be an integer from 0 to {MAX_GRACE_SECONDS}"


def check_name(name: str | None) -> None:
    """Refuse a key name the API would refuse, whoever asks (REST, dashboard or CLI)."""
    if name is not None and not (0 < len(name) <= MAX_NAME_LENGTH and is_label(name)):
        raise ValidationFailed(param_errors={"name": NAME_RULE})


async def issue(
    session: Session, ctx: DatabaseContext, *, org_id: str, name: str | None, actor: Actor
) -> IssuedApiKey:
    """Create a key inside an open transaction (audited) and return it with its secret."""
    check_name(name)
    secret = credentials.new_api_key()
    key = ApiKey(
        id=new_id("key"),
        org_id=org_id,
        name=name,
        prefix=credentials.API_KEY_PREFIX,
        last4=credentials.last4(secret),
        created_at=utcnow(ctx.clock),
    )
    await key_repo.insert(session, key, secret_hash=credentials.hash_secret(secret))
    await audit.record(
        session,
        ctx,
        org_id=org_id,
        actor=actor,
        action="api_key.create",
        target=key.id,
        details={"name": name, "last4": key.last4},
    )
    return IssuedApiKey(api_key=key, secret=secret)


async def create_api_key(
    ctx: DatabaseContext, *, org_id: str, name: str | None, actor: Actor
) -> IssuedApiKey:
    """Create an API key for the organization."""
    async with ctx.db.transaction() as session:
        return await issue(session, ctx, org_id=org_id, name=name, actor=actor)


async def list_api_keys(
    ctx: DatabaseContext, *, org_id: str, cursor: str | None, limit: int
) -> Page[ApiKey]:
    """List the organization's active keys, oldest first."""
    async with ctx.db.read() as session:
        keys = await key_repo.list_page(session, org_id, cursor=cursor, limit=limit)
    return page_of(keys, limit=limit)


async def revoke_api_key(ctx: Context, *, org_id: str, key_id: str, actor: Actor) -> None:
    """Revoke a key: it stops working on the next request, on every instance, and the
    dashboard sessions it opened end."""
    async with ctx.db.transaction() as session:
        key = await key_repo.get_active(session, key_id)
        if key is None:
            raise ApiKeyNotFound()
        if key.org_id != org_id:
            raise Forbidden()
        now = utcnow(ctx.clock)
        await key_repo.revoke(session, key_id, at=now)
        await session_repo.end_for_key(session, key_id, at=now)
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="api_key.revoke",
            target=key_id,
            details={"name": key.name, "last4": key.last4},
        )
        # Instances that cached the key learn of it at once (services/credential_cache.py).
        pending = await revocations.queue(
            session, ctx, key_id, expires_at=ctx.clock.time() + CACHE_SECONDS + 60
        )
    await revocations.publish(ctx, pending)


async def find_by_secret(ctx: DatabaseContext, secret: str) -> ApiKey | None:
    """Return the active key with this secret, found by the hash of the secret."""
    async with ctx.db.point_read() as connection:  # by its hash's unique index
        return await key_repo.find_active_by_hash(connection, credentials.hash_secret(secret))


async def find_superseded(ctx: DatabaseContext, secret: str) -> key_repo.GraceSecret | None:
    """Return the replaced secret `secret` is, while its grace lasts and its key is active."""
    async with ctx.db.point_read() as connection:  # by its hash, the primary key
        return await key_repo.find_grace_by_hash(
            connection, credentials.hash_secret(secret), now=utcnow(ctx.clock)
        )


async def rename_api_key(
    ctx: DatabaseContext, *, org_id: str, key_id: str, name: str, actor: Actor
) -> None:
    """Give a key a new name (audited)."""
    check_name(name)
    async with ctx.db.transaction() as session:
        key = await _key_to_change(session, org_id=org_id, key_id=key_id)
        await key_repo.rename(session, key_id, name=name)
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="api_key.rename",
            target=key_id,
            details={"name": name, "previous_name": key.name},
        )


async def rotate_api_key(
    ctx: Context, *, org_id: str, key_id: str, grace_seconds: int, actor: Actor
) -> IssuedApiKey:
    """Give a key a new secret; the one it replaces works `grace_seconds` more (rule 3)."""
    if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
        raise ValidationFailed(param_errors={"grace_seconds": GRACE_RULE})
    secret = credentials.new_api_key()
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        key = await _key_to_change(session, org_id=org_id, key_id=key_id)
        rotated = dataclasses.replace(key, last4=credentials.last4(secret))
        replaced = await key_repo.replace_secret(
            session, key_id, secret_hash=credentials.hash_secret(secret), last4=rotated.last4
        )
        if grace_seconds:
            ended = []
            await key_repo.add_grace(
                session,
                key_id,
                secret_hash=replaced,
                last4=key.last4,
                valid_until=now + timedelta(seconds=grace_seconds),
                at=now,
            )
        else:
            ended = [replaced, *await key_repo.drop_grace(session, key_id)]
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="api_key.rotate",
            target=key_id,
            details={
                "name": key.name,
                "last4": rotated.last4,
                "previous_last4": key.last4,
                "grace_seconds": grace_seconds,
            },
        )
    for secret_hash in ended:  # cached in embedded mode only (services/credential_cache.py)
        ctx.credential_cache.retire(secret_hash, now=ctx.clock.time())
    return IssuedApiKey(api_key=rotated, secret=secret)


async def _key_to_change(session: Session, *, org_id: str, key_id: str) -> ApiKey:
    """The organization's active key, its row locked; ApiKeyNotFound or Forbidden."""
    key = await key_repo.get_active_for_update(session, key_id)
    if key is None:
        raise ApiKeyNotFound()
    if key.org_id != org_id:
        raise Forbidden()
    return key


async def flush_grace_uses(ctx: Context) -> int:
    """Write the counted uses of replaced secrets to the audit trail (one `api_key.grace_use`
    event per key, `{"uses": n}`); return how many uses. On an error they are kept for the
    next flush."""
    counts = ctx.grace_uses.take()
    if not counts:
        return 0
    by_org: dict[str, list[tuple[str, str, dict[str, int]]]] = {}
    for (org_id, key_id), uses in sorted(counts.items()):
        by_org.setdefault(org_id, []).append(("api_key.grace_use", key_id, {"uses": uses}))
    try:
        async with ctx.db.transaction() as session:
            for org_id, entries in by_org.items():
                await audit.record_many(session, ctx, org_id=org_id, actor=SYSTEM, entries=entries)
    except BaseException:
        ctx.grace_uses.give_back(counts)
        raise
    return sum(counts.values())


async def sweep_replaced_secrets(ctx: DatabaseContext) -> int:
    """Delete the replaced secrets whose grace has ended; return how many."""
    async with ctx.db.transaction() as session:
        return await key_repo.sweep_grace(session, now=utcnow(ctx.clock))
