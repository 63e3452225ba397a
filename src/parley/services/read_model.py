"""The read model: read-mostly data served from this process's memory (issue #23).

What a request reads most and what changes rarely (an agent with its phone numbers and
tools, by name or ID) is loaded from the database on first use and kept per organization,
so that a read needs no database round trip while nothing changed.

Rules:
1. Bounded: at most `MAX_ORGS` organizations (least recently used dropped first) and
   `MAX_ENTRIES` entries each.
2. A change drops the organization's copies at once in the process that made it: every
   change is audited in its own transaction, the audit append marks the organization
   changed (`db.database.mark_changed`), and the commit tells this model before the change
   answers (`Database.add_commit_listener`). An event that records no change (a guarded
   append: services/audit.py rule 4) announces nothing; the generation it moves is seen
   by rule 4's check, which drops copies that were still right.
3. Other processes hear of it through the change feed (`stores.ChangeFeed`: Redis pub/sub
   in a fleet) and drop their copies too; a listener that (re)subscribes drops everything,
   since it may have missed announcements meanwhile.
4. A lost announcement cannot serve stale data for more than `BOUND_SECONDS`: each
   organization's copies carry its generation (the audit chain's last `seq`, bumped by
   every change in the change's transaction: `db.repos.audit.generation_of`), and copies
   older than `BOUND_SECONDS` are served only after one statement confirmed the
   generation unchanged. A change made by another process that publishes nothing (an
   operator command) is covered by the same bound. The check is made once for all the
   requests that need it (they await the same statement), and ahead of time: copies older
   than `REFRESH_AHEAD` of the bound are still served while one check runs in the
   background, so under steady traffic no request waits for it.
5. Only successful reads are kept; errors (not found, forbidden) always reach the
   database. Rules that decide a write (a disabled agent starts no conversation) read the
   row inside the write's own transaction, never this model.
6. Concurrent misses of one entry share one load: the reads that find it missing while it
   loads await that load (its value or its error) instead of each reading the database.
   After a burst of changes every read in flight missed at once, and each ran its own
   read transaction on a pooled connection of its own: 32 of them waited 150-800 ms
   (issue #38 item 11, docs/performance.md). A load belongs to the copies it was started
   for: copies dropped meanwhile start afresh with a load of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from parley.clock import Clock, SystemClock
from parley.db.database import Database
from parley.db.repos import audit as audit_repo
from parley.errors import Unavailable

if TYPE_CHECKING:
    from parley.stores.base import ChangeFeed

log = logging.getLogger(__name__)

T = TypeVar("T")

BOUND_SECONDS = 2.0
"""The longest a lost announcement can leave this process serving a change's old data."""
REFRESH_AHEAD = 0.5
"""The share of the bound after which a read starts the next generation check without
waiting for it."""
MAX_ORGS = 1_000
MAX_ENTRIES = 1_000
"""Entries per organization."""


@dataclass(slots=True)
class _OrgView:
    generation: int
    checked_at: float
    """Monotonic time at which a generation read that confirmed `generation` started."""
    entries: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict)
    loading: dict[Hashable, asyncio.Future[Any]] = field(default_factory=dict)
    """The loads running for these copies, by key (rule 6)."""


class ReadModel:
    """Per-organization copies of read-mostly records, invalidated as the rules above say."""

    def __init__(
        self,
        feed: ChangeFeed | None = None,
        *,
        clock: Clock | None = None,
        bound_seconds: float = BOUND_SECONDS,
        max_orgs: int = MAX_ORGS,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self._feed = feed
        self._clock = clock or SystemClock()
        self._bound = bound_seconds
        self._max_orgs = max_orgs
        self._max_entries = max_entries
        self._views: OrderedDict[str, _OrgView] = OrderedDict()
        self._attached: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._checks: dict[str, asyncio.Task[_OrgView]] = {}
        self._listener: asyncio.Task[None] | None = None

    async def get(
        self,
        db: Database,
        org_id: str,
        key: Hashable,
        load: Callable[[], Awaitable[T]],
    ) -> T:
        """Return the organization's entry `key`, calling `load` when it is not held.

        The organization's generation is read from `db` (one statement) when its copies
        were last confirmed more than `BOUND_SECONDS` ago.
        """
        self.attach(db)
        view = await self._current_view(db, org_id)
        if key in view.entries:
            view.entries.move_to_end(key)
            value: T = view.entries[key]
            return value
        loading = view.loading.get(key)
        if loading is None:
            loading = view.loading[key] = asyncio.ensure_future(load())
            loading.add_done_callback(lambda done: self._loaded(org_id, view, key, done))
        # shield: a cancelled read must not cancel the load the others await.
        loaded: T = await asyncio.shield(loading)
        return loaded

    def _loaded(
        self, org_id: str, view: _OrgView, key: Hashable, done: asyncio.Future[Any]
    ) -> None:
        """Keep a load's value in the copies it was started for, unless they were dropped
        meanwhile (rule 5: a success only)."""
        if view.loading.get(key) is done:
            del view.loading[key]
        if done.cancelled() or done.exception() is not None:  # read: never "not retrieved"
            return
        if self._views.get(org_id) is view:
            view.entries[key] = done.result()
            while len(view.entries) > self._max_entries:
                view.entries.popitem(last=False)

    def drop(self, org_id: str | None) -> None:
        """Forget an organization's copies (None: every organization's)."""
        if org_id is None:
            self._views.clear()
        else:
            self._views.pop(org_id, None)

    async def aclose(self) -> None:
        """Stop listening to the change feed and wait for announcements being sent."""
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None
        if self._tasks or self._checks:
            pending = [*self._tasks, *self._checks.values()]
            await asyncio.gather(*pending, return_exceptions=True)

    async def _current_view(self, db: Database, org_id: str) -> _OrgView:
        view = self._views.get(org_id)
        if view is not None:
            age = self._clock.monotonic() - view.checked_at
            if age <= self._bound:
                if age > self._bound * REFRESH_AHEAD:
                    self._check(db, org_id)  # not awaited: these copies are still good
                self._views.move_to_end(org_id)
                return view
        # shield: a cancelled request must not cancel the check the others await.
        return await asyncio.shield(self._check(db, org_id))

    def _check(self, db: Database, org_id: str) -> asyncio.Task[_OrgView]:
        """The organization's generation check: the one running, or a new one."""
        running = self._checks.get(org_id)
        if running is not None:
            return running
        task = asyncio.get_running_loop().create_task(self._confirm(db, org_id))
        self._checks[org_id] = task
        task.add_done_callback(lambda done: self._checked(org_id, done))
        return task

    def _checked(self, org_id: str, task: asyncio.Task[_OrgView]) -> None:
        if self._checks.get(org_id) is task:
            del self._checks[org_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            # A read waiting for it answers with the error; one started ahead is retried
            # by the first read past the bound.
            log.warning("read model: generation check failed: %s", type(error).__name__)

    async def _confirm(self, db: Database, org_id: str) -> _OrgView:
        """Read the generation; keep the copies if it is unchanged, else start afresh."""
        started = self._clock.monotonic()
        async with db.point_read() as connection:  # the chain's head, by its key
            current = await audit_repo.generation_of(connection, org_id)
        view = self._views.get(org_id)  # re-read: an announcement may have dropped it
        if view is not None and view.generation == current:
            view.checked_at = max(view.checked_at, started)
        else:
            view = self._views[org_id] = _OrgView(current, started)
        self._views.move_to_end(org_id)
        while len(self._views) > self._max_orgs:
            self._views.popitem(last=False)
        return view

    def attach(self, db: Database) -> None:
        """Hear the commits of `db` (rule 2: dropped here, announced to the feed) and listen
        to the feed (rule 3). Done on first use at the latest; the composition root does it
        at start, so that an instance that never read announces its changes too."""
        if id(db) in self._attached:
            return
        self._attached.add(id(db))
        db.add_commit_listener(self._committed)
        if self._feed is not None and self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._feed.listen(self.drop))

    def _committed(self, org_ids: frozenset[str]) -> None:
        for org_id in org_ids:
            self.drop(org_id)
            if self._feed is not None:
                task = asyncio.get_running_loop().create_task(self._announce(org_id))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _announce(self, org_id: str) -> None:
        if self._feed is None:
            return
        try:
            await self._feed.publish(org_id)
        except Unavailable:
            log.warning(
                "change feed unavailable: other instances see a change within %.0f s", self._bound
            )
