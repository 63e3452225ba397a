"""Active conversations and their caps (API.md section 17).

A conversation is active from its start (the socket's `config` accepted, an outbound call
placed, an inbound call answered) until it ends.

Rules:
1. Every start takes a lease on the conversation in two groups, its organization's and its
   project's, under their `max_active_conversations`: one atomic operation of the shared
   store (`ctx.active`, stores/base.py `CappedLeases`), so of any number of concurrent
   starts on any number of instances no group ever holds more than its cap. A start past
   a cap raises TooManyActiveConversations, and the start's transaction stores nothing.
2. A start that fails after its take (the transaction refused or failed) gives the lease
   back (`starting`). A start of a conversation counted already (a placed call's stream)
   renews its lease and is never refused.
3. A lease lasts the instance's lease (PARLEY_CONVERSATION_LEASE_SECONDS) and is renewed
   five times a lease by a beat of the housekeeping timer's own (`renew`: from memory,
   never behind a database call), from the take on, not from the commit: a database or a
   start slow to answer must not let a live conversation's lease lapse, or its place
   would go to another start, past the cap. A killed instance renews nothing: its
   conversations stop counting when their leases lapse, as the other instances end them
   as orphans (services/instances.py).
4. The ending releases the lease, once (services/endings.py). A release the store missed,
   or a renewal that raced an ending, is made good by the timer's next `settle`, which
   asks the database which of the conversations this instance holds ended (and stops
   renewing those live on another instance): an ended conversation counts a tick at most.
5. Leases are taken whether a cap is set or not: `active_conversations` is then the very
   count a cap would check, and setting a cap needs no warm-up. Without a cap the cost is
   that one store operation at each start and end; the caps are read in the start's own
   transaction (one statement).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from parley.db.repos import conversations as conversation_repo
from parley.db.repos import projects as project_repo
from parley.db.session import Session
from parley.errors import TooManyActiveConversations, Unavailable
from parley.records import Status
from parley.services.context import Context
from parley.services.held_conversations import Held

log = logging.getLogger(__name__)


def org_group(org_id: str) -> str:
    """The group of an organization's active conversations."""
    return f"org:{org_id}"


def project_group(project_id: str) -> str:
    """The group of a project's active conversations."""
    return f"project:{project_id}"


class Start:
    """The leases one start took: renewed by this instance from the take on, checked
    against the database once the start committed, given back if it failed (rule 2)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._taken: list[tuple[Held, bool]] = []
        """(held, added to the store by this take)"""

    async def take(
        self, session: Session, *, org_id: str, project_id: str, conversation_id: str
    ) -> None:
        """Count the conversation active, or raise TooManyActiveConversations (rule 1)."""
        caps = await project_repo.caps_of(session, project_id)
        await self.take_under(
            caps, org_id=org_id, project_id=project_id, conversation_id=conversation_id
        )

    async def take_under(
        self,
        caps: tuple[int | None, int | None],
        *,
        org_id: str,
        project_id: str,
        conversation_id: str,
    ) -> None:
        """`take`, with the project's and the organization's caps already read
        (`projects.caps_of`): for a start whose transaction is a unit of work
        (`Database.transact`), which may await nothing but its session."""
        project_cap, org_cap = caps
        workspace, project = org_group(org_id), project_group(project_id)
        decision = await self._ctx.active.take(
            conversation_id,
            [(workspace, org_cap), (project, project_cap)],
            lease_seconds=self._ctx.instance.lease_seconds,
        )
        if not decision.held:
            whose, cap = (
                ("workspace", org_cap) if decision.full == workspace else ("project", project_cap)
            )
            raise TooManyActiveConversations(
                f"The {whose} has {cap} active conversations, its max_active_conversations."
            )
        held = Held(org_id=org_id, conversation_id=conversation_id, project_id=project_id)
        # Renewed from now: a start slower than a lease must not lose its place (rule 3).
        self._ctx.held.add(held, starting=True)
        self._taken.append((held, decision.added))

    def commit(self) -> None:
        """The start committed: the database shows its conversations from now on."""
        for held, _ in self._taken:
            self._ctx.held.started(held.org_id, held.conversation_id)

    async def undo(self) -> None:
        """Give back what this start added."""
        for held, added in reversed(self._taken):
            self._ctx.held.started(held.org_id, held.conversation_id)
            if added:
                await release(
                    self._ctx,
                    org_id=held.org_id,
                    conversation_id=held.conversation_id,
                    project_id=held.project_id,
                )
        self._taken.clear()


@asynccontextmanager
async def starting(ctx: Context) -> AsyncIterator[Start]:
    """A start's leases: enter it around the start's transaction, so that a failure to
    commit gives them back too."""
    start = Start(ctx)
    try:
        yield start
    except BaseException:
        await start.undo()
        raise
    start.commit()


async def release(
    ctx: Context, *, org_id: str, conversation_id: str, project_id: str | None
) -> None:
    """Stop counting an ended conversation (rule 4): the store down, its lease lapses."""
    ctx.held.forget(org_id, conversation_id)
    groups = [org_group(org_id)] + ([project_group(project_id)] if project_id else [])
    await _release(ctx, conversation_id, groups)


async def renew(ctx: Context) -> int:
    """Renew the leases this instance holds, from memory alone (rule 3): the housekeeping
    timer runs it on its own beat, never behind a database call, so a database slow to
    answer cannot let a live conversation's lease lapse (its place would go to another
    start, past the cap). Return how many."""
    held = ctx.held.snapshot()
    if held:
        await ctx.active.renew(
            [(h.conversation_id, _groups(h)) for h in held],
            lease_seconds=ctx.instance.lease_seconds,
        )
    return len(held)


async def settle(ctx: Context) -> None:
    """Stop renewing the conversations that ended (their leases released again) or that
    another instance serves now (rule 4), as the database says."""
    settled = [
        h for h in ctx.held.snapshot() if not ctx.held.is_starting(h.org_id, h.conversation_id)
    ]
    if not settled:
        return
    async with ctx.db.read() as session:
        found = await conversation_repo.activity_of(
            session, [(h.org_id, h.conversation_id) for h in settled]
        )
    for each in settled:
        if ctx.held.is_starting(each.org_id, each.conversation_id):
            continue  # started again meanwhile (a placed call's stream)
        status, owner = found.get((each.org_id, each.conversation_id), (None, None))
        if status == Status.PENDING or (status == Status.LIVE and owner == ctx.instance.id):
            continue
        if status == Status.LIVE:  # served by another instance now: its lease is theirs
            ctx.held.forget(each.org_id, each.conversation_id)
        else:  # ended (or deleted): a release that did not reach the store
            await release(
                ctx,
                org_id=each.org_id,
                conversation_id=each.conversation_id,
                project_id=each.project_id,
            )


async def count_workspace(ctx: Context, *, org_id: str) -> int:
    """The organization's active conversations."""
    (count,) = await ctx.active.count([org_group(org_id)])
    return count


async def count_projects(ctx: Context, project_ids: Sequence[str]) -> list[int]:
    """Each project's active conversations."""
    return await ctx.active.count([project_group(project_id) for project_id in project_ids])


def _groups(held: Held) -> list[str]:
    return [org_group(held.org_id), project_group(held.project_id)]


async def _release(ctx: Context, conversation_id: str, groups: Sequence[str]) -> None:
    try:
        await ctx.active.release(conversation_id, groups)
    except Unavailable:
        log.warning("could not release an active conversation's lease: it lapses on its own")
