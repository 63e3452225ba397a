"""Rendering: the templates, the page route that turns errors into pages (statuses from
`parley.error_status`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from parley import errors
from parley.error_status import status_for
from parley.redaction import Tag
from parley.services import orgs
from parley.web.agent_forms import variable_rows
from parley.web.form_state import form_state
from parley.web.session import CsrfRejected, SignInRequired, Visitor, context_of
from parley.web.tool_forms import (
    ENDPOINT_METHODS,
    EXECUTION_MODES,
    TOOL_TYPES,
    masked_headers,
    pretty_json,
)

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
SIGN_IN_PATH = "/dashboard/sign-in"


def code_spans(text: str) -> Markup:
    """Escape `text` and show its `backticked` parts as code (the token checker's reasons
    quote values that way)."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: show the text as it is
        return Markup("`".join(parts))  # noqa: S704 - every part was escaped above
    shown = (f"<code>{part}</code>" if index % 2 else part for index, part in enumerate(parts))
    return Markup("".join(shown))  # noqa: S704 - every part was escaped above


REDACTION_TAG = re.compile("|".join(re.escape(str(tag)) for tag in Tag))
"""A tag that replaced personal data in a redacted text (API.md section 16, "Redaction")."""


def redaction_marks(text: str) -> Markup:
    """Escape `text` and mark each redaction tag in it (`[PHONE_NUMBER]`, `[EMAIL]`, …) as
    `<mark class="redacted">`; the tags hold no character that escaping changes."""
    escaped = str(escape(text))
    marked = REDACTION_TAG.sub(lambda tag: f'<mark class="redacted">{tag.group(0)}</mark>', escaped)
    return Markup(marked)  # noqa: S704 - the text was escaped above; the tags are fixed strings


def _when(value: datetime | float | None) -> str:
    if value is None:
        return "—"
    moment = datetime.fromtimestamp(value, tz=UTC) if isinstance(value, float) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


templates.env.filters["when"] = _when
templates.env.filters["json"] = pretty_json
templates.env.filters["code_spans"] = code_spans
templates.env.filters["redaction_marks"] = redaction_marks
templates.env.filters["masked_headers"] = masked_headers
templates.env.globals["form_state"] = form_state
templates.env.globals["variable_rows"] = variable_rows
templates.env.globals["tool_types"] = TOOL_TYPES
templates.env.globals["execution_modes"] = EXECUTION_MODES
templates.env.globals["endpoint_methods"] = ENDPOINT_METHODS


def error_page(
    request: Request,
    status: int,
    code: str,
    message: str,
    *,
    param_errors: Mapping[str, str] | None = None,
    retry_after: int | None = None,
) -> Response:
    """Render an error as a page with its status; nothing of the resource is shown."""
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    context = {"code": code, "message": message, "param_errors": param_errors or {}}
    return templates.TemplateResponse(
        request, "error.html", context, status_code=status, headers=headers
    )


class PageRoute(APIRoute):
    """A dashboard route: sign-in redirects, CSRF refusals and Parley errors become pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired:
                return RedirectResponse(SIGN_IN_PATH, status_code=303)
            except CsrfRejected:
                message = (
                    "The form's security token is missing or wrong, so nothing was changed. "
                    "Reload the page and try again."
                )
                return error_page(request, 403, "csrf_failed", message)
            except errors.ParleyError as error:
                return error_page(
                    request,
                    status_for(error),
                    error.code,
                    error.message,
                    param_errors=error.param_errors,
                    retry_after=error.retry_after,
                )

        return page_handler


async def page(
    request: Request,
    visitor: Visitor,
    template: str,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    **context: Any,
) -> Response:
    """Render a signed-in page: the organization's name, the nav, the CSRF token, and the
    refused form (`failed`, a FailedForm) if the page answers one."""
    org = await orgs.find_org(context_of(request), id_or_name=visitor.org_id)
    values = {"org": org, "csrf": visitor.csrf, "visitor": visitor, "failed": None, **context}
    return templates.TemplateResponse(
        request, template, values, status_code=status, headers=headers
    )


def done(path: str, what: str) -> RedirectResponse:
    """Redirect after a successful post (post-redirect-get) with a fixed notice code."""
    return RedirectResponse(f"{path}?done={what}", status_code=303)


NOTICES = {
    "agent_created": "Agent created.",
    "agent_updated": "Agent saved.",
    "agent_disabled": "Agent disabled: it starts no conversation and takes no update.",
    "agent_enabled": "Agent enabled.",
    "agent_deleted": "Agent deleted.",
    "numbers_released": "Phone numbers released.",
    "jwt_saved": "JWT settings saved.",
    "jwt_refreshed": "JWKS fetched.",
    "key_revoked": "API key revoked.",
    "token_revoked": "Session token revoked: its live sockets close within 2 seconds.",
    "conversation_ended": "Conversation ended.",
    "call_placed": "Call placed: the conversation starts when the callee answers.",
    "tool_updated": "Tool saved.",
    "tool_deleted": "Tool deleted.",
    "phone_saved": "Twilio account saved: calls to your numbers are checked with its token.",
    "phone_deleted": "Twilio account deleted: calls to your numbers are refused from now.",
    "webhook_updated": "Webhook saved.",
    "webhook_deleted": "Webhook deleted, with its deliveries.",
    "delivery_retried": "Delivery sent again.",
    "extraction_made": "Extraction done: its fields are listed below.",
    "evaluation_made": "Evaluation done: its result is listed below.",
    "schema_created": "Extraction schema created.",
    "schema_updated": "Extraction schema saved.",
    "schema_deleted": "Extraction schema deleted: the extractions made with it stay.",
    "eval_prompt_created": "Evaluation prompt created.",
    "test_run_queued": "Test run queued: this page follows it until it ends.",
}


def notice(request: Request) -> str | None:
    return NOTICES.get(request.query_params.get("done", ""))
