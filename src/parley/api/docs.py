"""`/docs`: Swagger UI served by Parley itself, with no request to any other host.

The assets (Swagger UI 5, Apache-2.0) come from the `fastapi-offline` package's data
directory, installed with Parley, and are served under `/docs/assets/`: the page works on a
machine with no internet access, which is how Parley is usually deployed.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")


def assets_directory() -> Path:
    """Return the directory of the packaged Swagger UI assets."""
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI, *, openapi_url: str = "/openapi.json") -> None:
    """Serve Swagger UI at /docs and its assets at /docs/assets (create the app with
    `docs_url=None`)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=assets_directory()), name="docs-assets")
    # The endpoints must not close over `app`: FastAPI caches endpoint analysis globally,
    # and a closure holding the app would keep every app built in a process alive.
    title = f"{app.title} API"

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=title,
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=f"{root}{DOCS_PATH}/oauth2-redirect",
            # No validator badge: it would load an image from the validator's host.
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": False},
        )

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_api_route(DOCS_PATH, swagger_ui, include_in_schema=False)
    app.add_api_route(f"{DOCS_PATH}/oauth2-redirect", oauth2_redirect, include_in_schema=False)
