"""Cursors: what `encode_cursor` makes decodes back; nothing else does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from parley.db.pagination import decode_cursor, encode_cursor
from parley.errors import InvalidCursor


@pytest.mark.parametrize(
    "row_id",
    ["agent_" + "0" * 32, "order:42@shop", "legacy id é"],
    ids=["made", "chosen", "legacy"],
)
def test_cursor_round_trip(row_id: str) -> None:
    moment = datetime(2026, 11, 21, 10, 0, 0, 123456, tzinfo=UTC)
    assert decode_cursor(encode_cursor(moment, row_id)) == (moment, row_id)


def test_cursor_altered_refused() -> None:
    cursor = encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), "c1")
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor[:-2])


def test_cursor_over_512_chars_refused() -> None:
    cursor = encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), "c" * 400)
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor)
