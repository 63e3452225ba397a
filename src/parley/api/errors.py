"""Every non-2xx body is the error envelope; statuses come from `parley.error_status`.

`{"error": {"message": str, "code": str}}`, plus `param_errors` on 400 validation failures
(API.md section 0).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from parley import errors, metrics
from parley.api.deps import context_of, get_api_key_principal
from parley.error_status import status_for

log = logging.getLogger("parley.api")

_HTTP_CODES = {
    400: ("invalid_request", "The request is invalid."),
    404: ("not_found", "Not found."),
    405: ("method_not_allowed", "Method not allowed."),
    413: ("payload_too_large", "The request body is larger than 1 MiB."),
}


KNOWN_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")

AUTH_REFUSAL_CODES = frozenset(
    {
        "multiple_credentials",
        "insufficient_scope",
        "issuer_not_registered",
        "conversation_id_mismatch",
        "jti_replayed",
        "rate_limited",
        "jwks_unavailable",
    }
)
"""Besides every 401: the refusals of a credential (API.md sections 1 and 7)."""


def error_body(error: errors.ParleyError) -> dict[str, Any]:
    """Return the envelope of an error."""
    body: dict[str, Any] = {"error": {"message": error.message, "code": error.code}}
    if error.param_errors:
        body["param_errors"] = error.param_errors
    return body


def error_headers(error: errors.ParleyError, status: int) -> dict[str, str]:
    """Return the headers an error carries: WWW-Authenticate on 401, Retry-After on 429/503."""
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if error.retry_after is not None:
        headers["Retry-After"] = str(max(1, error.retry_after))
    return headers


def error_response(error: errors.ParleyError) -> JSONResponse:
    """Render a Parley error as its HTTP response (REST and refused WebSocket handshakes)."""
    status = status_for(error)
    if status == 401 or error.code in AUTH_REFUSAL_CODES:
        metrics.count_auth_refusal(error.code)
    return JSONResponse(error_body(error), status_code=status, headers=error_headers(error, status))


def param_errors_from(validation: RequestValidationError) -> tuple[bool, dict[str, str]]:
    """Turn FastAPI's validation errors into `param_errors`; tell whether the JSON was bad."""
    found: dict[str, str] = {}
    bad_json = False
    for item in validation.errors():
        if item.get("type") == "json_invalid":
            bad_json = True
            continue
        location = [str(part) for part in item.get("loc", ()) if part not in ("body",)]
        if location and location[0] in ("query", "path", "header"):
            location = location[1:]
        key = ".".join(location) or "body"
        found.setdefault(key, _message_of(item))
    return bad_json, found


def _message_of(item: dict[str, Any]) -> str:
    kind = item.get("type", "")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    message = str(item.get("msg", "is invalid"))
    return message.removeprefix("Value error, ")


async def _parley_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, errors.ParleyError)  # noqa: S101 (registered for this class only)
    return error_response(error)


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)  # noqa: S101
    bad_json, found = param_errors_from(error)
    if bad_json:
        return await _after_credential(request, errors.InvalidJson())
    return error_response(errors.ValidationFailed(param_errors=found))


async def _after_credential(request: Request, error: errors.ParleyError) -> JSONResponse:
    """Answer a body that could not be read only once the request's credential passed.

    FastAPI reads and parses the body before it resolves the route's dependencies, so an
    anonymous `{bad` would learn `invalid_json` where API.md section 1 says 401. Every route
    with a body takes an API key: the check is the one the route would have run.
    """
    try:
        await get_api_key_principal(request, context_of(request))
    except errors.ParleyError as refusal:
        return error_response(refusal)
    return error_response(error)


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)  # noqa: S101
    if error.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8)
        return await _after_credential(request, errors.InvalidRequest())
    code, message = _HTTP_CODES.get(error.status_code, ("http_error", "The request failed."))
    headers = dict(error.headers or {})
    if error.status_code == 405 and (allowed := allowed_methods(request)):
        headers["Allow"] = allowed
    body = {"error": {"message": message, "code": code}}
    return JSONResponse(body, status_code=error.status_code, headers=headers)


def allowed_methods(request: Request) -> str | None:
    """Every method the request's path serves (Starlette names only the first route's).

    Asks each route whether it would take the path with each method: FastAPI nests included
    routers, and `matches` is the one interface every kind of route answers.
    """
    routes = [route for route in request.app.router.routes if not isinstance(route, Mount)]
    allowed = [
        method
        for method in KNOWN_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]
    return ", ".join(allowed) or None


async def _unexpected_error(request: Request, error: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=error)
    return error_response(errors.ParleyError())


def install_error_handlers(app: FastAPI) -> None:
    """Make every failure, ours or the framework's, answer with the envelope."""
    app.add_exception_handler(errors.ParleyError, _parley_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
