"""Keyset pagination over (created_at, id): stable under inserts, opaque to callers."""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, and_, bindparam, or_
from sqlalchemy.sql.elements import BindParameter, SQLCoreOperations

from parley.errors import InvalidCursor
from parley.ids import has_control_characters

MAX_PAGE_SIZE = 100
MAX_CURSOR_LENGTH = 512
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
SelectT = TypeVar("SelectT", bound=Select[*tuple[Any, ...]])


def encode_cursor(created_at: datetime, row_id: str) -> str:
    """Return the opaque cursor that continues after the row (created_at, row_id)."""
    raw = json.dumps([created_at.isoformat(), row_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Parse a cursor made by `encode_cursor`; anything else is 400 `invalid_cursor`.

    Strict, not forgiving: unpadded base64url of UTF-8 JSON `[created_at, id]`, where
    `created_at` is an aware UTC time and `id` a non-empty ID without control characters or
    unpaired surrogates, and encoding the result again gives back the very same cursor. So
    a crafted cursor (a lone surrogate, a date out of range, an offset, extra members) never
    reaches the database. Cursors are not signed: they only name a position in a listing
    the caller may read anyway, and a signing key would have to be shared by every instance.
    """
    decoded = _decode(cursor)
    if decoded is None or encode_cursor(*decoded) != cursor:
        raise InvalidCursor(param_errors={"cursor": "is not a cursor of this listing"})
    return decoded


def _decode(cursor: str) -> tuple[datetime, str] | None:
    if not cursor or len(cursor) > MAX_CURSOR_LENGTH or not _BASE64URL.fullmatch(cursor):
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded).decode("utf-8"))
    except (ValueError, binascii.Error, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(value, list) or len(value) != 2:
        return None
    created, row_id = value
    if not isinstance(created, str) or not isinstance(row_id, str):
        return None
    if not row_id or has_control_characters(row_id):
        return None
    try:
        moment = datetime.fromisoformat(created)
    except ValueError:
        return None
    if moment.utcoffset() != timedelta(0):
        return None
    return moment, row_id


def paginate(
    query: SelectT,
    *,
    created_at: SQLCoreOperations[datetime],
    row_id: SQLCoreOperations[str],
    cursor: str | None,
    limit: int,
) -> SelectT:
    """Order `query` by (created_at, id), start after `cursor`, and fetch one extra row."""
    if cursor is not None:
        query = query.where(after_cursor(created_at, row_id)).params(cursor_params(cursor))
    return query.order_by(created_at, row_id).limit(limit + 1)


def after_cursor(
    created_at: SQLCoreOperations[datetime], row_id: SQLCoreOperations[str]
) -> ColumnElement[bool]:
    """The keyset condition "after the cursor's row", with the bound parameters
    `after_created` and `after_id` (`cursor_params`), for statements built once."""
    after_created: BindParameter[datetime] = bindparam("after_created")
    return or_(
        created_at > after_created,
        and_(created_at == after_created, row_id > bindparam("after_id")),
    )


def cursor_params(cursor: str) -> dict[str, Any]:
    """The values of `after_cursor`'s parameters; 400 `invalid_cursor` for a bad cursor."""
    after_created, after_id = decode_cursor(cursor)
    return {"after_created": after_created, "after_id": after_id}
