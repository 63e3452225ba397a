"""The OpenAPI document: our error envelope everywhere, no framework 422, bearer auth."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

PUBLIC_PATHS = {"/health"}
ALWAYS_POSSIBLE = {
    "400": "Invalid request: parameters, body, credentials or the HTTP message itself.",
    "503": "A dependency is unavailable; see `Retry-After`.",
}
"""Answers any operation can give, documented on every one of them: a malformed request or
parameter (400), a database that is down (503), and, off the public paths, a missing or
invalid credential (401)."""


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """Return the OpenAPI schema, built once and cached on the app."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`parley_sk_…`), a session token (`parley_st_…`) or a JWT.",
    }
    for name in ("HTTPValidationError", "ValidationError"):
        components.get("schemas", {}).pop(name, None)
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            possible = dict(ALWAYS_POSSIBLE)
            if path not in PUBLIC_PATHS:
                operation["security"] = [{"bearer": []}]
                possible["401"] = "Missing or invalid credential."
            for status, description in possible.items():
                responses.setdefault(status, _error_response(description))
    app.openapi_schema = schema
    return schema


def _error_response(description: str) -> dict[str, Any]:
    envelope = {"$ref": "#/components/schemas/ErrorOut"}
    return {"description": description, "content": {"application/json": {"schema": envelope}}}
