"""The key cache: single flight, the 30 s miss throttle, stale serving, rotation, persistence."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.jwt.kit import AUD, ISS, NOW, ORG, FrozenClock, Signer, make_signer

from parley.errors import JwksUnavailable, Unavailable
from parley.jwt import (
    CachedIssuerResolver,
    FetchedJwks,
    InvalidSignature,
    IssuerPolicy,
    JwksFetchError,
    KeyCache,
    KeySource,
    StoredJwks,
    verify,
)
from parley.stores.memory import MemoryThrottle

pytestmark = pytest.mark.anyio

URL = "https://keys.example.com/jwks.json"
SOURCE = KeySource(org_id=ORG, jwks_url=URL)
DAY = 86_400


@dataclass
class FakeJwks:
    """A JWKS endpoint: serves `keys`, or fails while `down`; `gate` holds fetches open."""

    keys: list[dict[str, str]]
    max_age: int = 600
    down: bool = False
    gate: asyncio.Event | None = None
    calls: int = 0

    async def fetch(self, url: str) -> FetchedJwks:
        assert url == URL
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise JwksFetchError("The JWKS URL answered HTTP 503.")
        return FetchedJwks(document={"keys": list(self.keys)}, max_age_seconds=self.max_age)


@dataclass
class MemoryKeySetStore:
    rows: dict[str, StoredJwks] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    broken: bool = False

    async def load(self, org_id: str) -> StoredJwks | None:
        if self.broken:
            raise Unavailable
        return self.rows.get(org_id)

    async def save(self, org_id: str, jwks: StoredJwks) -> None:
        if self.broken:
            raise Unavailable
        self.rows[org_id] = jwks

    async def save_error(self, org_id: str, *, url: str, error: str) -> None:
        assert url == URL
        if self.broken:
            raise Unavailable
        self.errors.append(error)
        if org_id in self.rows:
            old = self.rows[org_id]
            self.rows[org_id] = StoredJwks(
                old.url, old.document, old.fetched_at, old.max_age_seconds, error
            )


@dataclass
class World:
    clock: FrozenClock
    jwks: FakeJwks
    store: MemoryKeySetStore
    throttle: MemoryThrottle
    cache: KeyCache

    def peer(self) -> KeyCache:
        """Another instance sharing the store and the throttle (Redis and the database)."""
        return KeyCache(
            fetcher=self.jwks, store=self.store, throttle=self.throttle, clock=self.clock
        )


@pytest.fixture
def first() -> Signer:
    return make_signer("EdDSA", "key-1")


@pytest.fixture
def world(first: Signer) -> World:
    clock = FrozenClock()
    jwks = FakeJwks(keys=[first.jwk])
    store = MemoryKeySetStore()
    throttle = MemoryThrottle(clock)
    cache = KeyCache(fetcher=jwks, store=store, throttle=throttle, clock=clock)
    return World(clock, jwks, store, throttle, cache)


async def verify_with(world: World, token: str, cache: KeyCache | None = None) -> Any:
    policy = IssuerPolicy(audience=AUD, keys=SOURCE)

    async def lookup(iss: str) -> IssuerPolicy | None:
        return policy if iss == ISS else None

    resolver = CachedIssuerResolver(lookup, cache or world.cache)
    return await verify(token, issuers=resolver, clock=world.clock)


def token_at(signer: Signer, now: float) -> str:
    return signer.token(iat=int(now), exp=int(now) + 900)


async def test_key_first_use_fetches_once_then_serves_from_memory(
    world: World, first: Signer
) -> None:
    for _ in range(5):
        assert await world.cache.key(SOURCE, "key-1", "EdDSA") is not None
    assert world.jwks.calls == 1
    assert world.store.rows[ORG].url == URL


async def test_key_concurrent_misses_share_one_fetch(world: World) -> None:
    world.jwks.gate = asyncio.Event()
    lookups = [asyncio.ensure_future(world.cache.key(SOURCE, "key-1", "EdDSA")) for _ in range(50)]
    await asyncio.sleep(0)
    world.jwks.gate.set()
    found = await asyncio.gather(*lookups)
    assert world.jwks.calls == 1
    assert all(key is not None and key.kid == "key-1" for key in found)


async def test_key_cancelled_waiter_does_not_cancel_shared_fetch(world: World) -> None:
    world.jwks.gate = asyncio.Event()
    doomed = asyncio.ensure_future(world.cache.key(SOURCE, "key-1", "EdDSA"))
    patient = asyncio.ensure_future(world.cache.key(SOURCE, "key-1", "EdDSA"))
    await asyncio.sleep(0)
    doomed.cancel()
    world.jwks.gate.set()
    assert (await patient) is not None
    assert world.jwks.calls == 1


async def test_key_random_kids_fetch_at_most_once_per_30s(world: World) -> None:
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    for second in range(120):
        for _ in range(100):
            assert await world.cache.key(SOURCE, secrets.token_hex(8), "EdDSA") is None
        world.clock.advance(1)
        assert world.jwks.calls <= 1 + (second + 1) // 30
    assert world.jwks.calls >= 4  # misses still refresh, once per window


async def test_key_random_kids_across_instances_share_the_throttle(world: World) -> None:
    instances = [world.cache, world.peer(), world.peer()]
    for instance in instances:
        await instance.key(SOURCE, "key-1", "EdDSA")
    for _ in range(10):
        world.clock.advance(6)
        for instance in instances:
            await instance.key(SOURCE, secrets.token_hex(8), "EdDSA")
    assert world.jwks.calls <= 1 + 60 // 30


async def test_key_miss_after_the_window_closed_fetches_at_once(
    world: World, first: Signer
) -> None:
    """API.md section 7: misses fetch at most once per 30 s, and at once otherwise. The
    local 5 s quiet period after a throttled miss never outlasts the throttle's window."""
    await world.cache.key(SOURCE, "key-1", "EdDSA")  # the fetch at t0
    world.clock.advance(27)
    assert await world.cache.key(SOURCE, "unknown", "EdDSA") is None  # throttled: no fetch
    assert world.jwks.calls == 1
    second = make_signer("EdDSA", "key-2")
    world.jwks.keys = [first.jwk, second.jwk]
    world.clock.advance(4.5)  # t0 + 31.5 s: 4.5 s after the throttled miss
    assert await world.cache.key(SOURCE, "key-2", "EdDSA") is not None
    assert world.jwks.calls == 2


async def test_key_unknown_kid_right_after_loading_the_stored_set_fetches(
    world: World, first: Signer
) -> None:
    """Loading the stored set (after a restart) is no miss check: a new kid fetches at once."""
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    second = make_signer("EdDSA", "key-2")
    world.jwks.keys = [first.jwk, second.jwk]
    world.clock.advance(53)
    restarted = world.peer()
    assert await restarted.key(SOURCE, "key-1", "EdDSA") is not None  # from the store
    assert world.jwks.calls == 1
    assert await restarted.key(SOURCE, "key-2", "EdDSA") is not None  # a miss: fetches
    assert world.jwks.calls == 2


async def test_key_expiry_triggers_refresh(world: World) -> None:
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    world.clock.advance(599)
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    assert world.jwks.calls == 1
    world.clock.advance(2)
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    assert world.jwks.calls == 2


async def test_verify_jwks_down_with_cached_keys_still_verifies(
    world: World, first: Signer
) -> None:
    await verify_with(world, token_at(first, NOW))
    world.jwks.down = True
    world.clock.advance(3600)
    verified = await verify_with(world, token_at(first, world.clock.now))
    assert verified.kid == "key-1"
    assert world.jwks.calls == 2
    assert world.store.errors == ["The JWKS URL answered HTTP 503."]


async def test_key_stale_served_up_to_24h_then_unavailable(world: World) -> None:
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    world.jwks.down = True
    world.clock.advance(DAY - 1)
    assert await world.cache.key(SOURCE, "key-1", "EdDSA") is not None
    world.clock.advance(2)
    with pytest.raises(JwksUnavailable) as caught:
        await world.cache.key(SOURCE, "key-1", "EdDSA")
    assert caught.value.retry_after == 30


async def test_key_no_keys_and_jwks_down_unavailable(world: World) -> None:
    world.jwks.down = True
    for _ in range(3):
        with pytest.raises(JwksUnavailable) as caught:
            await world.cache.key(SOURCE, "key-1", "EdDSA")
        assert caught.value.code == "jwks_unavailable"
    assert world.jwks.calls == 1  # the later requests are throttled, not refetched


async def test_verify_no_keys_and_jwks_down_is_503_not_401(world: World, first: Signer) -> None:
    world.jwks.down = True
    with pytest.raises(JwksUnavailable):
        await verify_with(world, token_at(first, NOW))


async def test_verify_rotation_add_then_retire(world: World, first: Signer) -> None:
    second = make_signer("ES256", "key-2")
    assert (await verify_with(world, token_at(first, NOW))).kid == "key-1"
    world.jwks.keys = [first.jwk, second.jwk]  # add the new key
    world.clock.advance(31)
    assert (await verify_with(world, token_at(second, world.clock.now))).kid == "key-2"
    assert (await verify_with(world, token_at(first, world.clock.now))).kid == "key-1"
    world.jwks.keys = [second.jwk]  # retire the old one
    await world.cache.refresh(SOURCE)
    with pytest.raises(InvalidSignature):
        await verify_with(world, token_at(first, world.clock.now))
    assert (await verify_with(world, token_at(second, world.clock.now))).kid == "key-2"


async def test_refresh_bypasses_throttle(world: World) -> None:
    for _ in range(3):
        view = await world.cache.refresh(SOURCE)
    assert world.jwks.calls == 3
    assert [key.kid for key in view.keys] == ["key-1"]
    assert view.fetched_at == NOW


async def test_refresh_failure_raises_and_is_recorded(world: World) -> None:
    await world.cache.refresh(SOURCE)
    world.jwks.down = True
    with pytest.raises(JwksFetchError):
        await world.cache.refresh(SOURCE)
    view = await world.cache.view(SOURCE)
    assert view.error == "The JWKS URL answered HTTP 503."
    assert [key.kid for key in view.keys] == ["key-1"]  # the last good keys stay


async def test_refresh_through_given_store_writes_there(world: World, first: Signer) -> None:
    given = MemoryKeySetStore()
    await world.cache.refresh(SOURCE, store=given)
    world.jwks.down = True
    with pytest.raises(JwksFetchError):
        await world.cache.refresh(SOURCE, store=given)
    assert given.rows[ORG].document == {"keys": [first.jwk]}
    assert given.errors == ["The JWKS URL answered HTTP 503."]
    assert world.store.rows == {}


async def test_refresh_given_store_failing_fails_refresh_keys_unchanged(world: World) -> None:
    await world.cache.refresh(SOURCE)
    world.jwks.keys = [make_signer("EdDSA", "key-2").jwk]
    with pytest.raises(Unavailable):
        await world.cache.refresh(SOURCE, store=MemoryKeySetStore(broken=True))
    assert [key.kid for key in (await world.cache.view(SOURCE)).keys] == ["key-1"]
    world.jwks.down = True
    with pytest.raises(Unavailable):
        await world.cache.refresh(SOURCE, store=MemoryKeySetStore(broken=True))
    assert (await world.cache.view(SOURCE)).error is None


async def test_key_restart_reads_stored_set_without_fetching(world: World) -> None:
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    world.jwks.down = True
    restarted = world.peer()
    world.clock.advance(60)
    assert await restarted.key(SOURCE, "key-1", "EdDSA") is not None
    assert world.jwks.calls == 1


async def test_key_peer_reads_set_its_peer_fetched(world: World, first: Signer) -> None:
    peer = world.peer()
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    await peer.key(SOURCE, "key-1", "EdDSA")
    second = make_signer("EdDSA", "key-2")
    world.jwks.keys = [first.jwk, second.jwk]
    world.clock.advance(31)
    assert await world.cache.key(SOURCE, "key-2", "EdDSA") is not None  # fetches
    assert await peer.key(SOURCE, "key-2", "EdDSA") is not None  # throttled: reads the store
    assert world.jwks.calls == 2


async def test_key_stored_set_of_other_url_ignored(world: World) -> None:
    other = KeySource(org_id=ORG, jwks_url="https://old.example.com/jwks")
    world.store.rows[ORG] = StoredJwks(other.jwks_url or "", {"keys": []}, NOW, 600)
    assert await world.cache.key(SOURCE, "key-1", "EdDSA") is not None
    assert world.jwks.calls == 1


async def test_key_store_down_on_save_still_serves(world: World) -> None:
    world.store.broken = True
    with pytest.raises(Unavailable):  # nothing cached and the store cannot be read
        await world.cache.key(SOURCE, "key-1", "EdDSA")
    await world.cache.refresh(SOURCE)  # fetch works; the durable copy is skipped
    assert await world.cache.key(SOURCE, "key-1", "EdDSA") is not None


async def test_key_static_source_never_fetches(world: World, first: Signer) -> None:
    weak = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "kid": "weak",
    }
    static = KeySource(org_id=ORG, static_keys=(first.jwk, weak))
    assert await world.cache.key(static, "key-1", "EdDSA") is not None
    assert await world.cache.key(static, "weak", "EdDSA") is None
    assert await world.cache.key(static, "missing", "EdDSA") is None
    assert world.jwks.calls == 0
    assert [key.kid for key in (await world.cache.refresh(static)).keys] == ["key-1"]


async def test_key_configuration_change_replaces_entry(world: World, first: Signer) -> None:
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    replacement = make_signer("EdDSA", "static-1")
    static = KeySource(org_id=ORG, static_keys=(replacement.jwk,))
    assert await world.cache.key(static, "key-1", "EdDSA") is None
    assert await world.cache.key(static, "static-1", "EdDSA") is not None


async def test_invalidate_forgets_keys(world: World) -> None:
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    world.cache.invalidate(ORG)
    world.store.rows.clear()
    world.clock.advance(31)
    await world.cache.key(SOURCE, "key-1", "EdDSA")
    assert world.jwks.calls == 2


async def test_view_unknown_org_is_empty(world: World) -> None:
    view = await world.cache.view(SOURCE)
    assert (view.keys, view.fetched_at, view.error) == ((), None, None)
    assert world.jwks.calls == 0


def test_key_source_needs_exactly_one_origin() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        KeySource(org_id=ORG)
    with pytest.raises(ValueError, match="exactly one"):
        KeySource(org_id=ORG, jwks_url=URL, static_keys=({"kty": "OKP"},))
