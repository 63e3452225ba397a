"""Turn a fetched page (one row more than asked) into a Page with its next cursor."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, TypeVar

from parley.db.pagination import MAX_PAGE_SIZE, encode_cursor
from parley.errors import ValidationFailed
from parley.records import Page

__all__ = ["MAX_PAGE_SIZE", "check_limit", "page_of"]


class _Listed(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


T = TypeVar("T", bound=_Listed)


def check_limit(limit: int) -> int:
    """Refuse a page size outside 1..100 (API.md section 9)."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValidationFailed(param_errors={"limit": f"must be between 1 and {MAX_PAGE_SIZE}"})
    return limit


def page_of(items: list[T], *, limit: int) -> Page[T]:
    """Cut the extra row off and turn it into the next cursor."""
    if len(items) <= limit:
        return Page(items=items, next_cursor=None)
    last = items[limit - 1]
    return Page(items=items[:limit], next_cursor=encode_cursor(last.created_at, last.id))
