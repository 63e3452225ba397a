"""JWT settings of the organization (API.md section 7)."""

from __future__ import annotations

from fastapi import APIRouter

from parley.api.convert import jwt_config_out
from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx
from parley.api.schemas import (
    JwtCheckIn,
    JwtCheckOut,
    JwtCheckStepOut,
    JwtConfigOut,
    JwtConfigPut,
    error_responses,
)
from parley.services import jwt_config, token_check

router = APIRouter(prefix="/v1/auth/jwt", tags=["jwt"])


@router.get("", response_model=JwtConfigOut, responses=error_responses(401, 403, 503))
async def get_jwt_config(ctx: Ctx, principal: ApiKeyPrincipal) -> JwtConfigOut:
    """Show the issuers, audience, key source, keys in force and the last fetch error."""
    return jwt_config_out(await jwt_config.get_jwt_config(ctx, org_id=principal.org_id))


@router.put(
    "", response_model=JwtConfigOut, responses=error_responses(400, 401, 403, 409, 413, 503)
)
async def put_jwt_config(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor, body: JwtConfigPut
) -> JwtConfigOut:
    """Register issuers, audience and either a JWKS URL (fetched now) or static keys."""
    config = jwt_config.JwtConfigInput(
        issuers=tuple(body.issuers),
        audience=body.audience,
        jwks_url=body.jwks_url,
        public_keys=tuple(body.public_keys) if body.public_keys is not None else None,
        require_jti=body.require_jti,
    )
    view = await jwt_config.put_jwt_config(ctx, org_id=principal.org_id, config=config, actor=actor)
    return jwt_config_out(view)


@router.post(
    "/refresh", response_model=JwtConfigOut, responses=error_responses(400, 401, 403, 404, 503)
)
async def refresh_jwks(ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor) -> JwtConfigOut:
    """Fetch the JWKS now; 400 `jwks_unreachable` if that fails."""
    view = await jwt_config.refresh_jwks(ctx, org_id=principal.org_id, actor=actor)
    return jwt_config_out(view)


@router.post(
    "/check", response_model=JwtCheckOut, responses=error_responses(400, 401, 403, 413, 503)
)
async def check_token(ctx: Ctx, principal: ApiKeyPrincipal, body: JwtCheckIn) -> JwtCheckOut:
    """Explain, step by step, how a JWT fares against your settings (API.md section 7).

    Nothing is spent: the rate limit is not charged and the `jti` is not recorded, so the
    token stays usable. The token is not echoed back, and another organization's settings
    are never shown.
    """
    result = await token_check.check_token(
        ctx, org_id=principal.org_id, token=body.token, conversation_id=body.conversation_id
    )
    failed = result.failed
    return JwtCheckOut(
        valid=result.valid,
        failed_step=failed.step if failed else None,
        code=failed.code if failed else None,
        steps=[
            JwtCheckStepOut(
                step=s.step, check=s.check, status=s.status, code=s.code, reason=s.reason
            )
            for s in result.steps
        ],
    )
