"""Known API keys and session tokens are cached in process; revocation stays instant
(issue #11: the fast request path)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from parley.errors import Unauthorized, Unavailable
from parley.records import Actor, Principal
from parley.services import Context, api_keys, session_tokens
from parley.services.authn import authenticate
from parley.services.credential_cache import CACHE_SECONDS, CredentialCache
from parley.stores.memory import MemoryRevocations
from tests.types import Tenant

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test")


async def test_credential_cache_known_api_key_needs_no_database_read(
    tenant: Tenant, statements: list[str]
) -> None:
    assert (await tenant.client.get("/v1/agents")).status_code == 200
    statements.clear()
    assert (await tenant.client.get("/v1/agents")).status_code == 200
    assert not [s for s in statements if "api_keys" in s], statements


async def test_credential_cache_revoked_api_key_refused_at_once(
    ctx: Context, tenant: Tenant
) -> None:
    other = await api_keys.create_api_key(ctx, org_id=tenant.org.id, name="other", actor=ACTOR)
    headers = {"Authorization": f"Bearer {other.secret}"}
    assert (await tenant.client.get("/v1/agents", headers=headers)).status_code == 200  # cached
    revoked = await tenant.client.delete(f"/v1/api_keys/{other.api_key.id}")
    assert revoked.status_code == 200, revoked.text
    assert (await tenant.client.get("/v1/agents", headers=headers)).status_code == 401


async def test_credential_cache_revoked_session_token_refused_at_once(
    ctx: Context, tenant: Tenant
) -> None:
    issued = await session_tokens.create_session_token(ctx, org_id=tenant.org.id, actor=ACTOR)
    headers = {"Authorization": f"Bearer {issued.secret}"}
    assert (await tenant.client.get("/v1/conversations", headers=headers)).status_code == 200
    revoked = await tenant.client.delete(f"/v1/auth/session_token/{issued.token.id}")
    assert revoked.status_code == 200, revoked.text
    assert (await tenant.client.get("/v1/conversations", headers=headers)).status_code == 401


class DownRevocations(MemoryRevocations):
    """A shared store that does not answer."""

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        raise Unavailable()

    async def is_revoked(self, credential_id: str) -> bool:
        raise Unavailable()


async def test_credential_cache_store_down_database_decides(ctx: Context, tenant: Tenant) -> None:
    other = await api_keys.create_api_key(ctx, org_id=tenant.org.id, name="other", actor=ACTOR)
    cached = await authenticate(ctx, other.secret)
    outage = dataclasses.replace(ctx, revocations=DownRevocations(ctx.clock))
    assert await authenticate(outage, other.secret) == cached  # the database vouches
    await api_keys.revoke_api_key(
        outage, org_id=tenant.org.id, key_id=other.api_key.id, actor=ACTOR
    )
    with pytest.raises(Unauthorized):
        await authenticate(outage, other.secret)


def principal(expires_at: float | None = None) -> Principal:
    return Principal(
        kind="session_token", org_id="org", credential_id="sess", expires_at=expires_at
    )


def test_credential_cache_entry_never_outlives_session_token() -> None:
    cache = CredentialCache()
    cache.put("h", principal(expires_at=1_000.0 + 5), now=1_000.0)
    assert cache.get("h", now=1_004.0) is not None
    assert cache.get("h", now=1_005.0) is None


def test_credential_cache_entry_lives_cache_seconds_at_most() -> None:
    cache = CredentialCache()
    cache.put("h", principal(), now=1_000.0)
    assert cache.get("h", now=1_000.0 + CACHE_SECONDS - 0.1) is not None
    assert cache.get("h", now=1_000.0 + CACHE_SECONDS) is None


def test_credential_cache_retired_hash_forgotten_and_not_remembered_again() -> None:
    """A rotation retires the replaced secret: a request that read the database before the
    rotation committed must not put it back (services/credential_cache.py)."""
    cache = CredentialCache()
    cache.put("old", principal(), now=1_000.0)
    cache.retire("old", now=1_000.0)
    assert cache.get("old", now=1_000.0) is None
    cache.put("old", principal(), now=1_001.0)  # the late put of a request under way
    assert cache.get("old", now=1_001.0) is None
    cache.put("old", principal(), now=1_000.0 + CACHE_SECONDS)
    assert cache.get("old", now=1_000.0 + CACHE_SECONDS) is not None


def test_credential_cache_holds_at_most_max_entries_oldest_dropped() -> None:
    cache = CredentialCache(max_entries=3)
    for n in range(5):
        cache.put(f"h{n}", principal(), now=1_000.0)
    assert [cache.get(f"h{n}", now=1_000.0) is not None for n in range(5)] == [
        False, False, True, True, True,
    ]  # fmt: skip


async def test_health_no_query_per_call_concurrent_checks_share_one_ping(
    client: Any, statements: list[str]
) -> None:
    assert (await client.get("/health")).status_code == 200
    statements.clear()
    answers = await asyncio.gather(*(client.get("/health") for _ in range(20)))
    assert [a.json()["status"] for a in answers] == ["ok"] * 20
    pings = [s for s in statements if s == "SELECT 1"]
    # Not one per call: the checks that arrive while a ping runs share its answer.
    assert 1 <= len(pings) <= 3, statements


async def test_health_never_trusts_an_earlier_success(client: Any, statements: list[str]) -> None:
    """Honest: each check that finds no ping running asks the database again (a server that
    hung just after a success is reported at once: tests/faults/test_postgres_hung.py)."""
    for _ in range(3):
        assert (await client.get("/health")).status_code == 200
    statements.clear()
    for _ in range(5):
        assert (await client.get("/health")).status_code == 200
    assert [s for s in statements if s == "SELECT 1"] == ["SELECT 1"] * 5, statements
