"""Keyset pagination over (created_at, id): stable under inserts, opaque to callers."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute

from parley.errors import ValidationFailed

MAX_PAGE_SIZE = 100
SelectT = TypeVar("SelectT", bound=Select[*tuple[Any, ...]])


def encode_cursor(created_at: datetime, row_id: str) -> str:
    """Return the opaque cursor that continues after the row (created_at, row_id)."""
    raw = json.dumps([created_at.isoformat(), row_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Parse a cursor made by `encode_cursor`; refuse anything else with a 400."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, row_id = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        if not isinstance(created, str) or not isinstance(row_id, str):
            raise ValueError(cursor)
        return datetime.fromisoformat(created), row_id
    except (ValueError, TypeError, binascii.Error, UnicodeError):
        raise ValidationFailed(param_errors={"cursor": "is not a cursor of this listing"}) from None


def paginate(
    query: SelectT,
    *,
    created_at: InstrumentedAttribute[datetime],
    row_id: InstrumentedAttribute[str],
    cursor: str | None,
    limit: int,
) -> SelectT:
    """Order `query` by (created_at, id), start after `cursor`, and fetch one extra row."""
    if cursor is not None:
        after_created, after_id = decode_cursor(cursor)
        query = query.where(
            or_(created_at > after_created, and_(created_at == after_created, row_id > after_id))
        )
    return query.order_by(created_at, row_id).limit(limit + 1)
