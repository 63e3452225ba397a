"""Prefixed random IDs (API.md section 0): `agent_<32 hex>` and friends."""

from __future__ import annotations

import re
import secrets
from typing import Literal

IdKind = Literal["org", "proj", "agent", "conv", "key", "sess"]

ID_KINDS: tuple[IdKind, ...] = ("org", "proj", "agent", "conv", "key", "sess")
_ID_SHAPE = re.compile(r"(org|proj|agent|conv|key|sess)_[0-9a-f]{32}")
_NAME_SHAPE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


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
