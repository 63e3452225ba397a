"""Open and close everything the services need (database, shared stores, JWT machinery,
the outbound client and the carrier's REST API on it) and hand them a Context: for the
app's lifespan and the commands that need the whole runtime. Which implementation of each
store is chosen here, and only here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from parley.clock import Clock
from parley.composition.options import RuntimeOptions, new_instance_id
from parley.db.database import Database
from parley.db.jti_claims import DatabaseReplayGuard
from parley.db.orphaned_closes import quiet_orphaned_closes
from parley.errors import Unavailable
from parley.jwt import CachedIssuerResolver, JwksFetcher, KeyCache
from parley.outbound import AddressPolicy, OutboundClient, TwilioCalls
from parley.recordings.directory import DirectoryStore
from parley.sealing import open_secret_box
from parley.services import post_call
from parley.services.context import Context, Instance, JwtRuntime
from parley.services.credential_cache import MAX_ENTRIES, CredentialCache
from parley.services.jwt_adapters import DatabaseKeySetStore, IssuerDirectory
from parley.services.read_model import ReadModel
from parley.stores import (
    CappedLeases,
    ChangeFeed,
    RateLimiter,
    ReplayGuard,
    Revocations,
    StoreHealth,
    Throttle,
)
from parley.stores.memory import (
    MemoryCappedLeases,
    MemoryRateLimiter,
    MemoryRevocations,
    MemoryStoreHealth,
    MemoryThrottle,
)

log = logging.getLogger(__name__)

SIGN_IN_RATE = (10, 10)
"""Failed dashboard sign-ins per client address: 10 per minute, bursts of 10."""


@dataclass(frozen=True, slots=True)
class _Stores:
    replay_guard: ReplayGuard
    rate_limiter: RateLimiter
    revocations: Revocations
    throttle: Throttle
    sign_in_limiter: RateLimiter
    health: StoreHealth
    active: CappedLeases
    """The active conversations' leases (services/active_conversations.py)."""
    changes: ChangeFeed | None
    """The read model's change feed: None in one process (its commits tell it at once)."""


@asynccontextmanager
async def open_context(options: RuntimeOptions, *, clock: Clock) -> AsyncIterator[Context]:
    """Yield a services Context; close the database, Redis and HTTP client afterwards."""
    async with AsyncExitStack() as stack:
        database = Database.from_url(
            options.database_url,
            connect_timeout=options.database_connect_timeout_seconds,
            statement_timeout=options.database_statement_timeout_seconds,
            pool_timeout=options.database_pool_timeout_seconds,
            pool_size=options.database_pool_size,
        )
        stack.push_async_callback(database.dispose)
        if database.driver is not None:  # PostgreSQL
            quiet_orphaned_closes()
        sealing = open_secret_box(options.secret_key, database_url=options.database_url)
        if sealing.warning:
            log.warning(sealing.warning)
        if options.recordings_dir is None:
            log.warning(
                "PARLEY_RECORDINGS_DIR is not set: with PostgreSQL no recording is kept; set "
                "it to a directory every instance shares (API.md section 16)."
            )
        stores = await _open_stores(options, database, clock, stack)
        # The one way out of the process (parley/outbound): JWKS fetches, webhook tools and
        # webhooks share it, each under its own switches.
        outbound = OutboundClient()
        stack.push_async_callback(outbound.aclose)
        fetcher = JwksFetcher(
            outbound,
            allow_http=options.jwks_allow_http,
            allow_private_networks=options.jwks_allow_private_networks,
        )
        cache = KeyCache(
            fetcher=fetcher,
            store=DatabaseKeySetStore(database),
            throttle=stores.throttle,
            clock=clock,
        )
        policies = IssuerDirectory(
            db=database, clock=clock, default_max_lifetime=options.jwt_max_lifetime_seconds
        )
        stack.push_async_callback(policies.aclose)  # before the database closes
        runtime = JwtRuntime(
            fetcher=fetcher,
            key_cache=cache,
            policies=policies,
            issuers=CachedIssuerResolver(policies.policy, cache),
            rate_limiter=stores.rate_limiter,
            replay_guard=stores.replay_guard,
            default_audience=options.default_audience,
        )
        language_model = None
        if options.language_model is not None:
            # The engine loads only where a language model is set (composition/options.py).
            from parley.engine import ChatCompletions

            language_model = ChatCompletions(
                base_url=options.language_model.base_url,
                api_key=options.language_model.api_key,
                model=options.language_model.model,
                timeout_s=options.language_model.timeout_s,
            )
            stack.push_async_callback(language_model.aclose)
        read_model = ReadModel(stores.changes)
        read_model.attach(database)  # its commits are announced from the start
        stack.push_async_callback(read_model.aclose)  # before the Redis client closes
        background: set[asyncio.Task[Any]] = set()
        # The work after calls still under way ends first, while everything it uses is open.
        stack.push_async_callback(post_call.drain, background)
        yield Context(
            background=background,
            db=database,
            clock=clock,
            jwt=runtime,
            revocations=stores.revocations,
            sign_in_limiter=stores.sign_in_limiter,
            store_health=stores.health,
            instance=Instance(
                id=options.instance_id or new_instance_id(),
                lease_seconds=options.conversation_lease_seconds,
            ),
            secrets=sealing.box,
            outbound=outbound,
            outbound_policy=AddressPolicy(
                allow_http=options.outbound_allow_http,
                allow_private_networks=options.outbound_allow_private_networks,
            ),
            # The carrier's REST API leaves through the same client, under its own policy.
            carrier=TwilioCalls(outbound, api_url=options.twilio_api_url),
            active=stores.active,
            # Cached credentials only where revocation is instant without fail: the
            # in-process store of embedded mode. A Redis outage or data loss could hide a
            # revocation from another instance's cache, so a fleet reads the database.
            credential_cache=CredentialCache(
                max_entries=MAX_ENTRIES if options.redis_url is None else 0
            ),
            read_model=read_model,
            recordings=DirectoryStore(options.recordings_dir) if options.recordings_dir else None,
            language_model=language_model,
            public_url=options.public_url,
        )


async def _open_stores(
    options: RuntimeOptions, database: Database, clock: Clock, stack: AsyncExitStack
) -> _Stores:
    rate, burst = options.jwt_rate_per_minute, options.jwt_rate_burst
    if options.redis_url is None:
        return _Stores(
            replay_guard=DatabaseReplayGuard(database, clock),  # survives a restart
            rate_limiter=MemoryRateLimiter(rate, burst, clock),
            revocations=MemoryRevocations(clock),
            throttle=MemoryThrottle(clock),
            sign_in_limiter=MemoryRateLimiter(*SIGN_IN_RATE, clock),
            health=MemoryStoreHealth(),
            active=MemoryCappedLeases(clock),
            changes=None,
        )
    # redis-py loads only when Redis is configured.
    from parley.stores.redis import (
        RedisCappedLeases,
        RedisChangeFeed,
        RedisRateLimiter,
        RedisReplayGuard,
        RedisRevocations,
        RedisStoreHealth,
        RedisThrottle,
        connect_redis,
    )

    client = connect_redis(options.redis_url)
    stack.push_async_callback(client.aclose)
    replay_guard = RedisReplayGuard(client)
    try:
        await replay_guard.establish()  # the data-loss marker (docs/reliability.md)
    except Unavailable:
        log.warning("Redis is unreachable: the replay guard will check its data set later")
    if options.notices_redis_loss:
        await stack.enter_async_context(replay_guard.watching())  # every instance notices
    return _Stores(
        replay_guard=replay_guard,
        rate_limiter=RedisRateLimiter(rate, burst, client),
        revocations=RedisRevocations(client),
        throttle=RedisThrottle(client),
        sign_in_limiter=RedisRateLimiter(*SIGN_IN_RATE, client),
        health=RedisStoreHealth(client),
        active=RedisCappedLeases(client),
        changes=RedisChangeFeed(client),
    )
