"""API keys: everything in their organization; shown once, stored as hashes."""

from __future__ import annotations

from parley import credentials
from parley.clock import utcnow
from parley.db.repos import api_keys as key_repo
from parley.db.repos import dashboard_sessions as session_repo
from parley.db.session import Session
from parley.errors import ApiKeyNotFound, Forbidden, ValidationFailed
from parley.ids import new_id
from parley.records import Actor, ApiKey, IssuedApiKey, Page
from parley.services import audit, revocations
from parley.services.context import Context, DatabaseContext
from parley.services.credential_cache import CACHE_SECONDS
from parley.services.paging import page_of
from parley.text import is_label

MAX_NAME_LENGTH = 100
NAME_RULE = f"must be 1 to {MAX_NAME_LENGTH} characters, without control characters"


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
