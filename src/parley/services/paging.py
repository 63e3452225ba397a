"""Turn a fetched page (one row more than asked) into a Page with its next cursor."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, TypeVar

from parley.db.pagination import MAX_PAGE_SIZE, encode_cursor
from parley.records import Page

__all__ = ["MAX_PAGE_SIZE", "page_of"]


class _Listed(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


T = TypeVar("T", bound=_Listed)


def page_of(items: list[T], *, limit: int) -> Page[T]:
    """Cut the extra row off and turn it into the next cursor."""
    if len(items) <= limit:
        return Page(items=items, next_cursor=None)
    last = items[limit - 1]
    return Page(items=items[:limit], next_cursor=encode_cursor(last.created_at, last.id))
