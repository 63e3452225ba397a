"""Strict base64url and JSON decoding for JOSE objects (RFC 7515 section 2, RFC 8259).

Everything here refuses what the standards do not allow instead of repairing it:

- base64url without padding, only the URL-safe alphabet, and zero unused trailing bits
  (RFC 7515 section 2 and appendix C; RFC 4648 section 3.5), so one byte string has one
  encoding;
- JSON objects with no duplicate member names (RFC 7515 section 5.2 step 4 allows refusing
  them, RFC 8259 section 4 makes them unpredictable), no `NaN`/`Infinity`, valid UTF-8 and a
  bounded nesting depth.

Every failure is a `MalformedError` (a ValueError); callers turn it into their own error.
"""

from __future__ import annotations

import base64
import binascii
import json
from json.scanner import make_scanner
from typing import Any, TypeGuard

MAX_JSON_DEPTH = 16
"""Deepest nesting of arrays and objects accepted in a header, payload or JWK."""

_TO_STANDARD = bytes.maketrans(b"-_+/=", b"+/!!!")
"""Map base64url to standard base64; `+`, `/` and `=` become invalid so strict mode refuses them."""

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_LAST_CHAR_OK = {
    2: frozenset(c for i, c in enumerate(_ALPHABET) if i % 16 == 0),
    3: frozenset(c for i, c in enumerate(_ALPHABET) if i % 4 == 0),
}
"""Allowed final characters when the segment length is 2 or 3 modulo 4 (unused bits zero)."""
_PADDING = (b"", b"", b"==", b"=")


class MalformedError(ValueError):
    """Input that breaks the strict encoding rules."""


def b64url_decode(segment: bytes) -> bytes:
    """Decode unpadded base64url, refusing padding, other alphabets and non-zero spare bits."""
    remainder = len(segment) % 4
    if remainder == 1 or (remainder and segment[-1] not in _LAST_CHAR_OK[remainder]):
        raise MalformedError("not canonical base64url")
    try:
        return binascii.a2b_base64(
            segment.translate(_TO_STANDARD) + _PADDING[remainder], strict_mode=True
        )
    except binascii.Error as exc:
        raise MalformedError("not base64url") from exc


def b64url_encode(data: bytes) -> str:
    """Encode bytes as base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise MalformedError("duplicate member name")
    return members


def _no_constant(name: str) -> Any:
    raise MalformedError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_members, parse_constant=_no_constant)
# For text with a single `{`, objects come back as tuples of pairs, built in C with no Python
# callback; the one object is then checked for duplicates below. This halves the parse time of
# typical JOSE headers and claim sets.
_FLAT_DECODER = json.JSONDecoder(object_pairs_hook=tuple, parse_constant=_no_constant)
# The C scanner the decoder uses; typeshed types its context as the scanner class itself.
_FLAT_SCAN = make_scanner(_FLAT_DECODER)  # type: ignore[arg-type]


def json_object(raw: bytes) -> dict[str, Any]:
    """Parse UTF-8 JSON text that must be an object; see the module docstring for the rules."""
    try:
        text = raw.decode("utf-8")
        if raw.count(b"{") != 1:
            return _nested_object(text, raw)
        try:  # the object with no surrounding whitespace, as JOSE libraries write it
            pairs, end = _FLAT_SCAN(text, 0)
        except StopIteration:
            pairs, end = None, -1
        if end != len(text):  # surrounding whitespace or an error: the full parser decides
            pairs = _FLAT_DECODER.decode(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, int limit
        raise MalformedError("not a JSON object") from exc
    if type(pairs) is not tuple:
        raise MalformedError("not a JSON object")
    value = dict(pairs)
    if len(value) != len(pairs):
        raise MalformedError("duplicate member name")
    if raw.count(b"[") >= MAX_JSON_DEPTH:
        _check_depth(value)
    return value


def _nested_object(text: str, raw: bytes) -> dict[str, Any]:
    """Parse an object that may hold objects, checking every one for duplicates."""
    value = _DECODER.decode(text)
    if type(value) is not dict:
        raise MalformedError("not a JSON object")
    # Depth <= number of opening brackets, so the walk only runs for unusual documents.
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH:
        _check_depth(value)
    return value


def _check_depth(root: dict[str, Any]) -> None:
    """Refuse nesting deeper than MAX_JSON_DEPTH, walking iteratively (no recursion)."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(root, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise MalformedError("JSON nested too deeply")
        children = container.values() if type(container) is dict else container
        stack.extend((c, depth + 1) for c in children if type(c) is dict or type(c) is list)


def is_text(value: object) -> TypeGuard[str]:
    """Tell whether `value` is a non-empty str that encodes as UTF-8 (no lone surrogates)."""
    if type(value) is not str or not value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
