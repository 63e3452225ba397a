"""Twilio's request signature (API.md section 13), pure: no I/O, no clock.

Twilio signs each webhook with `X-Twilio-Signature`: the base64 HMAC-SHA1, keyed with the
account's auth token, of the full URL it requested (scheme, host, path and query string),
followed by every POST parameter sorted by name, each as name + value with no separator.
Parameters that repeat a name are sorted by value too (as Twilio's own validators do).

The service checks with `signature_matches` (constant time, `hmac.compare_digest`); the
tests' simulated carrier signs with `sign`, so both ends use this one definition.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["sign", "signature_matches", "url_variants"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def sign(auth_token: str, url: str, params: Iterable[tuple[str, str]]) -> str:
    """Return the `X-Twilio-Signature` Twilio sends for a POST of `params` to `url`."""
    message = url + "".join(name + value for name, value in sorted(params))
    digest = hmac.new(auth_token.encode("utf-8"), message.encode("utf-8"), hashlib.sha1)
    return base64.b64encode(digest.digest()).decode("ascii")


def url_variants(url: str) -> tuple[str, ...]:
    """Return `url`, and the same URL with its default port written or left out.

    Twilio has signed both `https://host/path` and `https://host:443/path` for one number's
    webhook (its own validators accept either), so both count as the URL it requested.
    """
    parts = urlsplit(url)
    default = _DEFAULT_PORTS.get(parts.scheme)
    if default is None or parts.hostname is None:
        return (url,)
    host = parts.netloc.rpartition("@")[2]
    if parts.port is None:
        other = f"{host}:{default}"
    elif parts.port == default:
        other = host.rsplit(":", 1)[0]
    else:
        return (url,)
    userinfo = parts.netloc[: -len(host)] if parts.netloc != host else ""
    return (url, urlunsplit(parts._replace(netloc=userinfo + other)))


def signature_matches(
    auth_token: str, url: str, params: Iterable[tuple[str, str]], signature: str
) -> bool:
    """Tell whether `signature` is Twilio's for this request, comparing in constant time."""
    pairs = list(params)
    given = signature.encode("utf-8", "replace")
    found = False
    for candidate in url_variants(url):
        expected = sign(auth_token, candidate, pairs).encode("ascii")
        # Every variant is compared (no early exit), so the time taken says nothing about
        # which one was close.
        found |= hmac.compare_digest(expected, given)
    return found
