"""Dashboard pages: JWT settings and the token checker, API keys, session tokens, the list
of conversations (a conversation's own page is web/conversation.py's) and the activity
trail."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from parley.error_status import status_for
from parley.errors import ParleyError, ValidationFailed
from parley.services import (
    api_keys,
    audit,
    dashboard,
    jwt_config,
    session_tokens,
    token_check,
)
from parley.web import forms
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import SIGN_IN_PATH, PageRoute, done, notice, page
from parley.web.session import Visitor, checked_form, context_of, visitor

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
CONVERSATIONS_PAGE = 50
"""Conversations a page of the dashboard's list (newest first) shows."""


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


# --- JWT settings -----------------------------------------------------------------------


async def _jwt_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    ctx = context_of(request)
    view = await jwt_config.get_jwt_config(ctx, org_id=signed_in.org_id)
    return await page(
        request,
        signed_in,
        "jwt.html",
        status=status,
        config=view,
        # The registered static keys, pre-filled as a JWKS: saving the form unchanged (to
        # change the audience, say) keeps them instead of failing on an empty box.
        static_keys=_as_jwks(view.public_keys),
        now=ctx.clock.time(),
        notice=notice(request),
        **extra,
    )


def _as_jwks(keys: Sequence[Mapping[str, str]]) -> str:
    return json.dumps({"keys": [dict(key) for key in keys]}, indent=2) if keys else ""


@router.get("/jwt")
async def jwt_page(request: Request, signed_in: SignedIn) -> Response:
    return await _jwt_page(request, signed_in)


@router.post("/jwt")
async def save_jwt(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        config = _jwt_config_of(form)
        await jwt_config.put_jwt_config(
            context_of(request), org_id=signed_in.org_id, config=config, actor=signed_in.actor
        )
    except FORM_ERRORS as error:
        failed = FailedForm.of("jwt-settings", form, error)
        return await _jwt_page(request, signed_in, status=status_for(error), failed=failed)
    return done("/dashboard/jwt", "jwt_saved")


def _jwt_config_of(form: FormData) -> jwt_config.JwtConfigInput:
    issuers = forms.items(form, "issuers")
    if not 1 <= len(issuers) <= 10:
        raise ValidationFailed(param_errors={"issuers": "give 1 to 10 issuers, one per line"})
    source = forms.text(form, "source", max_length=16)
    jwks_url = (
        forms.text(form, "jwks_url", max_length=2048, required=True) if source == "jwks" else None
    )
    keys = forms.public_keys(form) if source == "static" else None
    if jwks_url is None and keys is None:
        raise ValidationFailed(param_errors={"source": "choose a JWKS URL or static keys"})
    return jwt_config.JwtConfigInput(
        issuers=tuple(issuers),
        audience=forms.text(form, "audience", max_length=512) or None,
        jwks_url=jwks_url,
        public_keys=keys,
        require_jti=forms.checked(form, "require_jti"),
    )


@router.post("/jwt/refresh")
async def refresh_jwt(request: Request, signed_in: SignedIn, _form: CheckedForm) -> Response:
    try:
        await jwt_config.refresh_jwks(
            context_of(request), org_id=signed_in.org_id, actor=signed_in.actor
        )
    except ParleyError as error:
        # The page shows the stored fetch error beside the keys still in force.
        failure = f"{error.message} ({error.code})"
        return await _jwt_page(request, signed_in, status=status_for(error), failure=failure)
    return done("/dashboard/jwt", "jwt_refreshed")


@router.post("/jwt/check")
async def check_jwt(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        token = forms.text(form, "token", max_length=65_536, required=True)
        conversation_id = forms.text(form, "conversation_id", max_length=128) or None
        result = await token_check.check_token(
            context_of(request),
            org_id=signed_in.org_id,
            token=token,
            conversation_id=conversation_id,
        )
    except FORM_ERRORS as error:  # the token is never typed back into the page
        failed = FailedForm.of("token-check", form, error, secret_fields=["token"])
        return await _jwt_page(request, signed_in, status=status_for(error), failed=failed)
    return await _jwt_page(request, signed_in, check=result, checked_conversation=conversation_id)


# --- API keys ---------------------------------------------------------------------------


async def _keys_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    listed = await api_keys.list_api_keys(
        context_of(request), org_id=signed_in.org_id, cursor=None, limit=100
    )
    return await page(
        request,
        signed_in,
        "api_keys.html",
        status=status,
        keys=listed.items,
        notice=notice(request),
        **extra,
    )


@router.get("/api-keys")
async def keys_page(request: Request, signed_in: SignedIn) -> Response:
    return await _keys_page(request, signed_in)


@router.post("/api-keys")
async def create_key(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        name = forms.text(form, "name", max_length=100) or None
        issued = await api_keys.create_api_key(
            context_of(request), org_id=signed_in.org_id, name=name, actor=signed_in.actor
        )
    except FORM_ERRORS as error:
        failed = FailedForm.of("create-key-form", form, error)
        return await _keys_page(request, signed_in, status=status_for(error), failed=failed)
    return await _keys_page(request, signed_in, created=issued)


@router.post("/api-keys/{key_id}/revoke")
async def revoke_key(
    request: Request, signed_in: SignedIn, _form: CheckedForm, key_id: str
) -> Response:
    await api_keys.revoke_api_key(
        context_of(request), org_id=signed_in.org_id, key_id=key_id, actor=signed_in.actor
    )
    if key_id == signed_in.session.api_key_id:  # this session ended with its key
        return RedirectResponse(SIGN_IN_PATH, status_code=303)
    return done("/dashboard/api-keys", "key_revoked")


# --- session tokens ---------------------------------------------------------------------


async def _tokens_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    active = await session_tokens.list_active(context_of(request), org_id=signed_in.org_id)
    return await page(
        request,
        signed_in,
        "session_tokens.html",
        status=status,
        tokens=active,
        notice=notice(request),
        **extra,
    )


@router.get("/session-tokens")
async def tokens_page(request: Request, signed_in: SignedIn) -> Response:
    return await _tokens_page(request, signed_in)


@router.post("/session-tokens")
async def create_token(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        ttl = forms.text(form, "ttl_seconds", max_length=5) or "300"
        if not ttl.isdigit():
            raise ValidationFailed(param_errors={"ttl_seconds": "must be a number of seconds"})
        ids = forms.conversation_ids(form)
        issued = await session_tokens.create_session_token(
            context_of(request),
            org_id=signed_in.org_id,
            ttl_seconds=int(ttl),
            conversation_ids=ids or None,
            actor=signed_in.actor,
        )
    except FORM_ERRORS as error:
        failed = FailedForm.of("create-token-form", form, error)
        return await _tokens_page(request, signed_in, status=status_for(error), failed=failed)
    return await _tokens_page(request, signed_in, created=issued)


@router.post("/session-tokens/{token_id}/revoke")
async def revoke_token(
    request: Request, signed_in: SignedIn, _form: CheckedForm, token_id: str
) -> Response:
    await session_tokens.revoke_session_token(
        context_of(request), org_id=signed_in.org_id, token_id=token_id, actor=signed_in.actor
    )
    return done("/dashboard/session-tokens", "token_revoked")


# --- conversations ----------------------------------------------------------------------


@router.get("/conversations")
async def conversations_page(
    request: Request, signed_in: SignedIn, cursor: str | None = None
) -> Response:
    listed = await dashboard.recent_conversations(
        context_of(request), org_id=signed_in.org_id, cursor=cursor, limit=CONVERSATIONS_PAGE
    )
    return await page(
        request, signed_in, "conversations.html", listed=listed, notice=notice(request)
    )


# --- activity ---------------------------------------------------------------------------


@router.get("/activity")
async def activity_page(
    request: Request, signed_in: SignedIn, cursor: str | None = None
) -> Response:
    listed = await audit.list_events(
        context_of(request),
        org_id=signed_in.org_id,
        action=None,
        target=None,
        cursor=cursor,
        limit=100,
    )
    return await page(request, signed_in, "activity.html", listed=listed)
