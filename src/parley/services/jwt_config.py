"""Per-organization JWT settings, the issuer directory and the stored JWKS (API.md section 7).

Rules:
1. An issuer belongs to one organization only (409 `issuer_taken`).
2. Exactly one of a JWKS URL and static public keys.
3. Static keys must be Ed25519, P-256 or RSA >= 2048 public signing keys (400); a static key
   without `kid` gets its RFC 7638 thumbprint.
4. A JWKS URL is fetched once on `PUT`; if that fails, 400 `jwks_unreachable` and nothing
   is stored.
5. `audience` defaults to the host of the service's public URL.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parley import jwt
from parley.clock import Clock, utcnow
from parley.db.database import Database
from parley.db.repos import jwt_configs as config_repo
from parley.db.session import Session
from parley.errors import IssuerTaken, NotFound, ValidationFailed
from parley.ids import has_control_characters
from parley.records import Actor, JwtConfig
from parley.services import audit
from parley.services.context import Context

log = logging.getLogger(__name__)

POLICY_TTL_SECONDS = 2.0
"""How long an instance trusts its copy of an issuer's policy before asking the database."""
POLICY_CACHE_SIZE = 10_000
MAX_STATIC_KEYS = 20
"""Static keys per organization, counting each key of a JWKS given whole (as the API caps
`public_keys` entries)."""


class JwtNotConfigured(NotFound):
    code = "jwt_not_configured"
    message = "The organization has no JWT configuration."


@dataclass(frozen=True, slots=True)
class KeyInForce:
    kid: str
    kty: str
    alg: str
    source: str
    thumbprint: str = ""
    """RFC 7638 SHA-256 thumbprint of the public key."""


@dataclass(frozen=True, slots=True)
class JwtConfigView:
    """What `GET /v1/auth/jwt` shows."""

    issuers: tuple[str, ...]
    audience: str
    jwks_url: str | None
    public_keys: tuple[Mapping[str, str], ...]
    keys: tuple[KeyInForce, ...]
    jwks_fetched_at: float | None
    jwks_error: str | None
    require_jti: bool


@dataclass(frozen=True, slots=True)
class JwtConfigInput:
    """A whole configuration as `PUT /v1/auth/jwt` gives it."""

    issuers: tuple[str, ...]
    audience: str | None
    jwks_url: str | None
    public_keys: tuple[object, ...] | None
    require_jti: bool


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
    """The IssuerResolver of `parley.jwt`: issuer -> policy from the database, keys from the
    KeyCache. Policies are kept for 2 s per instance (bounded LRU, unknown issuers too), so a
    flood of tokens costs no query each, and a changed configuration holds everywhere
    within 2 s (at once on the instance that changed it)."""

    def __init__(
        self,
        *,
        db: Database,
        cache: jwt.KeyCache,
        clock: Clock,
        default_max_lifetime: int,
    ) -> None:
        self._db = db
        self._cache = cache
        self._clock = clock
        self._max_lifetime = default_max_lifetime
        self._policies: OrderedDict[str, tuple[float, jwt.IssuerPolicy | None]] = OrderedDict()

    async def policy(self, iss: str) -> jwt.IssuerPolicy | None:
        if has_control_characters(iss):
            return None  # no registered issuer holds one (PUT refuses them)
        now = self._clock.monotonic()
        cached = self._policies.get(iss)
        if cached is not None and now - cached[0] < POLICY_TTL_SECONDS:
            return cached[1]
        async with self._db.read() as session:
            org_id = await config_repo.org_of_issuer(session, iss)
            config = await config_repo.get(session, org_id) if org_id else None
        policy = self._policy_of(config) if config is not None else None
        self._policies[iss] = (now, policy)
        self._policies.move_to_end(iss)
        while len(self._policies) > POLICY_CACHE_SIZE:
            self._policies.popitem(last=False)
        return policy

    async def key(
        self, policy: jwt.IssuerPolicy, kid: str, alg: jwt.Algorithm
    ) -> jwt.VerificationKey | None:
        return await self._cache.key(policy.keys, kid, alg)

    def forget(self, org_id: str) -> None:
        """Drop every cached policy and key of an organization after its settings changed."""
        for iss, (_, policy) in list(self._policies.items()):
            if policy is None or policy.org_id == org_id:
                del self._policies[iss]
        self._cache.invalidate(org_id)

    def _policy_of(self, config: JwtConfig) -> jwt.IssuerPolicy:
        return jwt.IssuerPolicy(
            audience=config.audience,
            keys=key_source_of(config),
            max_lifetime_seconds=self._max_lifetime,
            require_jti=config.require_jti,
        )


def key_source_of(config: JwtConfig) -> jwt.KeySource:
    if config.jwks_url is not None:
        return jwt.KeySource(org_id=config.org_id, jwks_url=config.jwks_url)
    return jwt.KeySource(org_id=config.org_id, static_keys=config.static_keys)


async def get_jwt_config(ctx: Context, *, org_id: str) -> JwtConfigView:
    """Return the organization's settings and the keys in force (an empty view if none)."""
    async with ctx.db.read() as session:
        config = await config_repo.get(session, org_id)
        issuers = await config_repo.issuers_of(session, org_id)
    if config is None:
        return JwtConfigView((), ctx.jwt.default_audience, None, (), (), None, None, False)
    view = await ctx.jwt.key_cache.view(key_source_of(config))
    return _view(config, issuers, view)


async def put_jwt_config(
    ctx: Context, *, org_id: str, config: JwtConfigInput, actor: Actor
) -> JwtConfigView:
    """Replace the organization's settings; fetch a JWKS URL once before storing it."""
    issuers = _distinct_issuers(config.issuers)
    if (config.jwks_url is None) == (config.public_keys is None):
        raise ValidationFailed(
            param_errors={"jwks_url": "give exactly one of jwks_url and public_keys"}
        )
    static_keys: list[Mapping[str, str]] = []
    document: Mapping[str, Any] | None = None
    fetched_at: float | None = None
    max_age: int | None = None
    if config.public_keys is not None:
        static_keys = _import_static_keys(config.public_keys)
    elif config.jwks_url is not None:
        fetched = await ctx.jwt.fetcher.fetch(config.jwks_url)
        if not len(jwt.load_jwks(fetched.document)):
            raise jwt.JwksFetchError(jwt.NO_USABLE_KEY)  # a failed fetch, as on a refresh
        document, fetched_at, max_age = fetched.document, ctx.clock.time(), fetched.max_age_seconds
    async with ctx.db.transaction(config_repo.UNIQUE_VIOLATIONS) as session:
        taken = await config_repo.issuers_taken_elsewhere(session, issuers, org_id)
        if taken:
            raise IssuerTaken(param_errors={"issuers": ", ".join(taken)})
        await config_repo.replace(
            session,
            org_id=org_id,
            issuers=issuers,
            audience=config.audience or ctx.jwt.default_audience,
            jwks_url=config.jwks_url,
            static_keys=static_keys,
            require_jti=config.require_jti,
            jwks_document=document,
            jwks_fetched_at=fetched_at,
            jwks_max_age=max_age,
            now=utcnow(ctx.clock),
        )
        details: dict[str, object] = {
            "issuers": issuers,
            "audience": config.audience or ctx.jwt.default_audience,
            "jwks_url": config.jwks_url,
            "static_kids": [key["kid"] for key in static_keys],
            "require_jti": config.require_jti,
        }
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="jwt.update",
            target="jwt_settings",
            details=details,
        )
    ctx.jwt.issuers.forget(org_id)
    return await get_jwt_config(ctx, org_id=org_id)


async def refresh_jwks(ctx: Context, *, org_id: str, actor: Actor) -> JwtConfigView:
    """Fetch the organization's JWKS now (static keys are reloaded).

    The fetch's outcome (the new key set, or the error beside the last good keys) and its
    `jwt.refresh` audit event are written in one transaction (services/audit.py rule 1);
    the fetch itself runs before that transaction opens. If the write fails, the refresh
    fails and the keys in force stay as they were.
    """
    async with ctx.db.transaction() as session:
        config = await config_repo.get(session, org_id)
        issuers = await config_repo.issuers_of(session, org_id)
    if config is None:
        raise JwtNotConfigured()

    async def record(session: Session, org: str, outcome: Mapping[str, object]) -> None:
        await audit.record(
            session,
            ctx,
            org_id=org,
            actor=actor,
            action="jwt.refresh",
            target="jwt_settings",
            details=outcome,
        )

    try:
        view = await ctx.jwt.key_cache.refresh(
            key_source_of(config), store=DatabaseKeySetStore(ctx.db, recorder=record)
        )
    finally:
        ctx.jwt.issuers.forget(org_id)
    async with ctx.db.transaction() as session:
        if config.jwks_url is None:  # static keys: nothing stored but the event
            await record(session, org_id, {"ok": True, "kids": [key.kid for key in view.keys]})
        config = await config_repo.get(session, org_id) or config
    return _view(config, issuers, view)


def _distinct_issuers(issuers: Sequence[str]) -> list[str]:
    if len(set(issuers)) != len(issuers):
        raise ValidationFailed(param_errors={"issuers": "must not repeat an issuer"})
    return list(issuers)


def _static_key_entries(values: Sequence[object]) -> list[tuple[str, object]]:
    """Each key given, named by its place (`public_keys.1`, `public_keys.0.keys.2`): an entry
    that is a whole JWKS (`{"keys": [...]}`, as `parley keys generate` writes) gives its keys."""
    entries: list[tuple[str, object]] = []
    for position, value in enumerate(values):
        place = f"public_keys.{position}"
        inner = value.get("keys") if isinstance(value, Mapping) and "kty" not in value else None
        if not isinstance(inner, list):
            entries.append((place, value))
        elif not inner:
            raise jwt.KeyRejected(param_errors={place: "The JWKS holds no key."})
        else:
            entries.extend((f"{place}.keys.{index}", key) for index, key in enumerate(inner))
    if len(entries) > MAX_STATIC_KEYS:
        raise ValidationFailed(param_errors={"public_keys": f"at most {MAX_STATIC_KEYS} keys"})
    return entries


def _import_static_keys(values: Sequence[object]) -> list[Mapping[str, str]]:
    imported: list[Mapping[str, str]] = []
    problems: dict[str, str] = {}
    for position, value in _static_key_entries(values):
        try:
            imported.append(jwt.import_static_key(value).jwk)
        except jwt.KeyRejected as error:
            problems[position] = error.message
    if problems:
        raise jwt.KeyRejected(param_errors=problems)
    kids = [key["kid"] for key in imported]
    if len(set(kids)) != len(kids):
        raise ValidationFailed(param_errors={"public_keys": "two keys have the same kid"})
    return imported


def _view(config: JwtConfig, issuers: Sequence[str], view: jwt.KeySetView) -> JwtConfigView:
    source = "jwks" if config.jwks_url is not None else "static"
    keys = tuple(KeyInForce(k.kid, k.kty, k.alg, source, jwt.thumbprint(k.jwk)) for k in view.keys)
    return JwtConfigView(
        issuers=tuple(issuers),
        audience=config.audience,
        jwks_url=config.jwks_url,
        public_keys=config.static_keys,
        keys=keys,
        jwks_fetched_at=view.fetched_at,
        jwks_error=view.error if config.jwks_url is not None else None,
        require_jti=config.require_jti,
    )
