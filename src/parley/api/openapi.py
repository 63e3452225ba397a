"""The OpenAPI document: our error envelope everywhere, no framework 422, bearer auth."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

PUBLIC_PATHS = {"/health"}


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
            responses = operation.get("responses", {})
            responses.pop("422", None)
            if path not in PUBLIC_PATHS:
                operation["security"] = [{"bearer": []}]
    app.openapi_schema = schema
    return schema
