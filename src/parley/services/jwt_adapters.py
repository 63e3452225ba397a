"""The database behind the JWT kernel (`parley.jwt`): issuer policies and the stored JWKS.

Runtime adapters, built by the composition root: `IssuerDirectory` answers issuer -> policy
for the kernel's `CachedIssuerResolver` (which adds the keys from the KeyCache), and
`DatabaseKeySetStore` is the kernel's `KeySetStore`. The configuration use cases that
change what they read are in services/jwt_config.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

from parley import jwt
from parley.clock import Clock
from parley.db.database import Database
from parley.db.repos import jwt_configs as config_repo
from parley.db.session import Session
from parley.ids import has_control_characters
from parley.records import JwtConfig

POLICY_TTL_SECONDS = 2.0
"""How long an instance trusts its copy of an issuer's policy before asking the database."""
POLICY_CACHE_SIZE = 10_000
REFRESH_AHEAD = 0.5
"""Past this share of the TTL a look-up still answers from the copy and starts a refresh."""

log = logging.getLogger(__name__)

RefreshRecorder = Callable[[Session, str, Mapping[str, object]], Awaitable[None]]
"""Writes more rows in the transaction that stores a fetch's outcome: (session, org ID,
outcome), the outcome being `{"ok": True, "kids": [...]}` or `{"ok": False, "error": ...}`."""


class DatabaseKeySetStore:
    """The KeySetStore of `parley.jwt`: the last good JWKS lives in the database.

    With a `recorder`, each write also runs it in the same transaction, so the stored
    outcome of a refresh and its audit event commit or roll back together.
    """

    def __init__(self, db: Database, *, recorder: RefreshRecorder | None = None) -> None:
        self._db = db
        self._recorder = recorder

    async def load(self, org_id: str) -> jwt.StoredJwks | None:
        async with self._db.read() as session:
            config = await config_repo.get(session, org_id)
        if config is None or config.jwks_document is None or config.jwks_document_url is None:
            return None
        return jwt.StoredJwks(
            url=config.jwks_document_url,
            document=config.jwks_document,
            fetched_at=config.jwks_fetched_at or 0.0,
            max_age_seconds=config.jwks_max_age or 600,
            error=config.jwks_error,
        )

    async def save(self, org_id: str, jwks: jwt.StoredJwks) -> None:
        async with self._db.transaction() as session:
            await config_repo.save_jwks(
                session,
                org_id,
                url=jwks.url,
                document=jwks.document,
                fetched_at=jwks.fetched_at,
                max_age=jwks.max_age_seconds,
            )
            if self._recorder is not None:
                kids = [key.kid for key in jwt.load_jwks(jwks.document).keys]
                await self._recorder(session, org_id, {"ok": True, "kids": kids})

    async def save_error(self, org_id: str, *, url: str, error: str) -> None:
        async with self._db.transaction() as session:
            await config_repo.save_jwks_error(session, org_id, url=url, error=error)
            if self._recorder is not None:
                await self._recorder(session, org_id, {"ok": False, "error": error})


class IssuerDirectory:
    """Issuer -> policy from the database, the look-up behind the kernel's
    `CachedIssuerResolver`. Policies are kept for 2 s per instance (bounded LRU, unknown
    issuers too), so a flood of tokens costs no query each, and a changed configuration
    holds everywhere within 2 s (at once on the instance that changed it: `forget`).

    A policy past half its 2 s is still served while one refresh runs in the background,
    and the look-ups that find it expired (or missing) share one refresh: every request of
    a busy issuer used to read it itself when its 2 s ran out, and those 30 reads at once
    were the JWT read's p99 (docs/performance.md).
    """

    def __init__(self, *, db: Database, clock: Clock, default_max_lifetime: int) -> None:
        self._db = db
        self._clock = clock
        self._max_lifetime = default_max_lifetime
        self._policies: OrderedDict[str, tuple[float, jwt.IssuerPolicy | None]] = OrderedDict()
        self._refreshes: dict[str, asyncio.Task[jwt.IssuerPolicy | None]] = {}
        self._running: set[asyncio.Task[jwt.IssuerPolicy | None]] = set()
        """Every refresh not finished, the ones a `forget` left untracked too (`aclose`)."""

    async def policy(self, iss: str) -> jwt.IssuerPolicy | None:
        """Return the policy of the organization that registered `iss`, or None."""
        if has_control_characters(iss):
            return None  # no registered issuer holds one (PUT refuses them)
        cached = self._policies.get(iss)
        if cached is not None:
            age = self._clock.monotonic() - cached[0]
            if age < POLICY_TTL_SECONDS:
                if age > POLICY_TTL_SECONDS * REFRESH_AHEAD:
                    self._refresh(iss)  # not awaited: this copy is still good
                return cached[1]
        # shield: a cancelled request must not cancel the refresh the others await.
        return await asyncio.shield(self._refresh(iss))

    def forget(self, org_id: str) -> None:
        """Drop every cached policy of an organization (and unknown issuers) after its
        settings changed; a refresh already running may have read the old settings, so
        the next look-up starts a new one."""
        for iss, (_, policy) in list(self._policies.items()):
            if policy is None or policy.org_id == org_id:
                del self._policies[iss]
        self._refreshes.clear()

    async def aclose(self) -> None:
        """Wait for the refreshes still running (before the database closes)."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    def _refresh(self, iss: str) -> asyncio.Task[jwt.IssuerPolicy | None]:
        """The issuer's refresh: the one running, or a new one."""
        running = self._refreshes.get(iss)
        if running is not None:
            return running
        task = asyncio.get_running_loop().create_task(self._read(iss))
        self._refreshes[iss] = task
        self._running.add(task)
        task.add_done_callback(functools.partial(self._refreshed, iss))
        return task

    def _refreshed(self, iss: str, task: asyncio.Task[jwt.IssuerPolicy | None]) -> None:
        self._running.discard(task)
        if self._refreshes.get(iss) is task:
            del self._refreshes[iss]
        if not task.cancelled() and (error := task.exception()) is not None:
            # A look-up waiting for it answers with the error; one started ahead is retried
            # by the first look-up past the TTL.
            log.warning("issuer policy refresh failed: %s", type(error).__name__)

    async def _read(self, iss: str) -> jwt.IssuerPolicy | None:
        started = self._clock.monotonic()
        async with self._db.read() as session:
            org_id = await config_repo.org_of_issuer(session, iss)
            config = await config_repo.get(session, org_id) if org_id else None
        policy = self._policy_of(config) if config is not None else None
        if self._refreshes.get(iss) is asyncio.current_task():  # no `forget` meanwhile
            self._policies[iss] = (started, policy)
            self._policies.move_to_end(iss)
            while len(self._policies) > POLICY_CACHE_SIZE:
                self._policies.popitem(last=False)
        return policy

    def _policy_of(self, config: JwtConfig) -> jwt.IssuerPolicy:
        return jwt.IssuerPolicy(
            audience=config.audience,
            keys=key_source_of(config),
            max_lifetime_seconds=self._max_lifetime,
            require_jti=config.require_jti,
        )


def key_source_of(config: JwtConfig) -> jwt.KeySource:
    """Where an organization's keys come from: its JWKS URL, or its static keys."""
    if config.jwks_url is not None:
        return jwt.KeySource(org_id=config.org_id, jwks_url=config.jwks_url)
    return jwt.KeySource(org_id=config.org_id, static_keys=config.static_keys)
