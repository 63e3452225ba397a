"""Prefixed random IDs (API.md section 0): `agent_<32 hex>` and friends."""

from __future__ import annotations

import re
import secrets
from typing import Literal

IdKind = Literal[
    "org", "proj", "agent", "conv", "key", "sess", "tool", "wh", "msg", "storage",
    "schema", "extr", "evalp", "eval", "item", "tscn", "trun",
]  # fmt: skip

ID_KINDS: tuple[IdKind, ...] = (
    "org", "proj", "agent", "conv", "key", "sess", "tool", "wh", "msg", "storage",
    "schema", "extr", "evalp", "eval", "item", "tscn", "trun",
)  # fmt: skip
"""`storage`: an external storage policy, `schema`: an extraction schema, `extr`: an
extraction, `evalp`: an evaluation prompt, `eval`: an evaluation (API.md section 16),
`item`: a conversation item (section 17), `tscn`: a test scenario, `trun`: a test run
(section 19)."""
_ID_SHAPE = re.compile(
    r"(org|proj|agent|conv|key|sess|tool|wh|msg|storage|schema|extr|evalp|eval|item|tscn|trun)_[0-9a-f]{32}"
)
_NAME_SHAPE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_CONVERSATION_ID_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


def new_id(kind: IdKind) -> str:
    """Return a fresh ID of the given kind: its prefix and a random 128-bit value in hex."""
    return f"{kind}_{secrets.token_hex(16)}"


def looks_like_id(value: str, kind: IdKind | None = None) -> bool:
    """Tell whether `value` has the shape of an ID (of `kind`, or of any kind)."""
    match = _ID_SHAPE.fullmatch(value)
    return match is not None and (kind is None or match.group(1) == kind)


def is_valid_name(value: str) -> bool:
    """Tell whether `value` is a valid project or agent name (and is not shaped like an ID)."""
    return _NAME_SHAPE.fullmatch(value) is not None and not looks_like_id(value)


NAME_RULE = (
    "must be 1-64 characters of a-z, 0-9, '-' and '_', start with a letter or digit, "
    "and not have the shape of an ID"
)


def is_valid_conversation_id(value: str) -> bool:
    """Tell whether `value` may name a conversation: the one rule for customer-chosen IDs,
    whether they come in `POST /v1/conversations` or in a JWT's `conversation_id` claim."""
    return _CONVERSATION_ID_SHAPE.fullmatch(value) is not None


CONVERSATION_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_', ':', '@' and '-', "
    "starting with a letter or digit"
)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Unicode category Cc, all of it (a test compares it with `unicodedata`)."""


def has_control_characters(value: str) -> bool:
    """Tell whether `value` holds a control character (Unicode Cc: C0, DEL, C1) or an
    unpaired surrogate: neither belongs in a name, an ID, an issuer or a URL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return _CONTROL.search(value) is not None
