"""Per-organization JWT settings: read, replace, refresh the JWKS (API.md section 7).

What verification reads of them at run time (issuer policies, the stored JWKS) is in
services/jwt_adapters.py.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parley import jwt
from parley.clock import utcnow
from parley.db.repos import jwt_configs as config_repo
from parley.db.session import Session
from parley.errors import IssuerTaken, NotFound, ValidationFailed
from parley.records import Actor, JwtConfig
from parley.services import audit
from parley.services.context import Context
from parley.services.jwt_adapters import DatabaseKeySetStore, key_source_of

log = logging.getLogger(__name__)

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
    ctx.jwt.forget(org_id)
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
        ctx.jwt.forget(org_id)
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
