"""The dashboard's browser side of a session: the cookie, the CSRF tokens, the visitor.

- The session cookie holds a random ID (services/dashboard.py keeps only its hash):
  HttpOnly, SameSite=Strict, Path=/dashboard, Secure when the public URL is https.
- CSRF: every form of a signed-in page carries HMAC-SHA256(session ID, "csrf"), checked with
  a constant-time comparison before anything changes. Nothing extra is stored: only a
  browser holding the cookie can compute or receive the token.
- The sign-in form has no session yet: it uses a double-submit token (a random cookie that
  the form repeats), so another site cannot sign a browser in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from parley.records import Actor, DashboardSession
from parley.services import Context
from parley.services import dashboard as dashboard_service

SESSION_COOKIE = "parley_dashboard"
SIGN_IN_COOKIE = "parley_dashboard_sign_in"
COOKIE_PATH = "/dashboard"


class SignInRequired(Exception):
    """No live session: the browser goes to the sign-in page."""


class CsrfRejected(Exception):
    """A form without the right CSRF token: refused, nothing changed."""


@dataclass(frozen=True, slots=True)
class Visitor:
    """A signed-in browser: its session, the CSRF token of its forms, its audit actor."""

    session: DashboardSession
    session_id: str
    csrf: str
    actor: Actor

    @property
    def org_id(self) -> str:
        return self.session.org_id


def context_of(request: Request) -> Context:
    context: Context = request.app.state.context
    return context


def client_actor(request: Request) -> Actor:
    """The client address and request ID of a request, before anyone is known."""
    return Actor(
        kind="anonymous",
        id=None,
        client=request.client.host if request.client else None,
        request_id=getattr(request.state, "request_id", None),
    )


def csrf_token(session_id: str) -> str:
    return hmac.new(session_id.encode(), b"parley-dashboard-csrf", hashlib.sha256).hexdigest()


async def visitor(request: Request) -> Visitor:
    """Resolve the session cookie to a Visitor, or raise SignInRequired."""
    session_id = request.cookies.get(SESSION_COOKIE, "")
    found = await dashboard_service.resume(context_of(request), session_id=session_id)
    if found is None:
        raise SignInRequired()
    client = client_actor(request)
    actor = Actor(
        kind="dashboard",
        id=found.api_key_id,
        client=client.client,
        request_id=client.request_id,
    )
    return Visitor(found, session_id, csrf_token(session_id), actor)


async def checked_form(request: Request, signed_in: Visitor) -> FormData:
    """Return the posted form if it carries the session's CSRF token; else CsrfRejected."""
    form = await request.form()
    sent = form.get("csrf_token")
    if not isinstance(sent, str) or not hmac.compare_digest(sent, signed_in.csrf):
        raise CsrfRejected()
    return form


def sign_in_token(request: Request) -> str:
    """Return the double-submit token of the sign-in form (new if the browser has none)."""
    current = request.cookies.get(SIGN_IN_COOKIE, "")
    return current if 20 <= len(current) <= 64 else secrets.token_urlsafe(24)


def sign_in_form_ok(request: Request, form: FormData) -> bool:
    cookie = request.cookies.get(SIGN_IN_COOKIE, "")
    sent = form.get("csrf_token")
    return bool(cookie) and isinstance(sent, str) and hmac.compare_digest(sent, cookie)


def set_cookie(response: Response, name: str, value: str, *, secure: bool, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        secure=secure,
        httponly=True,
        samesite="strict",
    )


def clear_cookie(response: Response, name: str, *, secure: bool) -> None:
    response.delete_cookie(name, path=COOKIE_PATH, secure=secure, httponly=True, samesite="strict")
