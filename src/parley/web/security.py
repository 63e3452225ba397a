"""Headers and origin checks for every dashboard response.

- `Content-Security-Policy`: nothing but the dashboard's own stylesheet and images loads;
  no script runs at all (the dashboard has none), forms post only to the dashboard, and no
  page may be framed (`frame-ancestors 'none'`, and `X-Frame-Options: DENY` for older
  browsers). A page that plays a recording sends its own policy (`csp`), the same but for
  `media-src` naming the one origin its `<audio>` loads from; the policy here is added
  to every response that carries none.
- `Referrer-Policy: same-origin` (`no-referrer` would make browsers send `Origin: null`
  on the dashboard's own form posts), `X-Content-Type-Options: nosniff`, and
  `Cache-Control: no-store` on pages (a created key or token must not sit in a cache).
- A state-changing request whose `Origin` is another origin is refused with 403 before any
  form is read (a second line behind the CSRF token and SameSite=Strict).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/dashboard"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
CSP_HEADER = b"content-security-policy"
HEADERS: list[tuple[bytes, bytes]] = [
    (CSP_HEADER, CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"x-content-type-options", b"nosniff"),
]
NO_STORE = (b"cache-control", b"no-store")


_ORIGIN = re.compile(
    r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?"
)


def media_origin(url: str | None) -> str | None:
    """The origin (`scheme://host[:port]`) a media URL loads from; None for no URL, or one
    that is not plain http(s) (it would not be allowed to load, and could not break the
    header it goes into)."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
    except ValueError:
        return None
    return origin if _ORIGIN.fullmatch(origin) else None


def csp(*, media: str | None = None) -> str:
    """The dashboard's policy; `media`, an origin from `media_origin`, may serve audio."""
    return f"{CSP}; media-src {media}" if media else CSP


class DashboardHeadersMiddleware:
    """Add the security headers to /dashboard responses; refuse cross-origin writes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD") and _cross_origin(scope):
            await _forbidden(send)
            return
        static = path.startswith(PREFIX + "/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                own = message.get("headers", [])
                # A page's own policy (`csp`) stands in for the default: a second header
                # would only narrow the first (browsers enforce both).
                has_policy = any(name.lower() == CSP_HEADER for name, _ in own)
                headers = [*own, *(h for h in HEADERS if not (has_policy and h[0] == CSP_HEADER))]
                if not static:
                    headers.append(NO_STORE)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _cross_origin(scope: Scope) -> bool:
    headers = dict(scope.get("headers", []))
    origin = headers.get(b"origin")
    if origin is None:
        return False
    host = headers.get(b"host", b"")
    scheme = scope.get("scheme", "http").encode()
    return bool(origin != scheme + b"://" + host)


async def _forbidden(send: Send) -> None:
    body = b"Cross-origin form posts are refused."
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
