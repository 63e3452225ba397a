"""API keys: everything in their organization; shown once, stored as hashes."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from parley import credentials
from parley.clock import utcnow
from parley.db.repos import api_keys as key_repo
from parley.errors import ApiKeyNotFound, Forbidden
from parley.ids import new_id
from parley.records import ApiKey, IssuedApiKey, Page
from parley.services.context import Context
from parley.services.paging import page_of


async def issue(
    session: AsyncSession, ctx: Context, *, org_id: str, name: str | None
) -> IssuedApiKey:
    """Create a key inside an open transaction and return it with its secret."""
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
    return IssuedApiKey(api_key=key, secret=secret)


async def create_api_key(ctx: Context, *, org_id: str, name: str | None) -> IssuedApiKey:
    """Create an API key for the organization."""
    async with ctx.db.transaction() as session:
        return await issue(session, ctx, org_id=org_id, name=name)


async def list_api_keys(
    ctx: Context, *, org_id: str, cursor: str | None, limit: int
) -> Page[ApiKey]:
    """List the organization's active keys, oldest first."""
    async with ctx.db.transaction() as session:
        keys = await key_repo.list_page(session, org_id, cursor=cursor, limit=limit)
    return page_of(keys, limit=limit)


async def revoke_api_key(ctx: Context, *, org_id: str, key_id: str) -> None:
    """Revoke a key: it stops working on the next request, on every instance."""
    async with ctx.db.transaction() as session:
        row = await key_repo.get_active(session, key_id)
        if row is None:
            raise ApiKeyNotFound()
        if row.org_id != org_id:
            raise Forbidden()
        await key_repo.revoke(session, row, at=utcnow(ctx.clock))


async def find_by_secret(ctx: Context, secret: str) -> ApiKey | None:
    """Return the active key with this secret, found by the hash of the secret."""
    async with ctx.db.transaction() as session:
        return await key_repo.find_active_by_hash(session, credentials.hash_secret(secret))
