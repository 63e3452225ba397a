"""Upsert an agent by name (API.md section 17; services/agents.py holds the rules).

It creates the agent named in its project, or replaces every field of the one that exists
(the fields not given take their defaults), under the rules of an update: a disabled agent
is refused (409 `agent_disabled`). Two upserts of one name at once: one inserts; the
other's insert is refused by the unique name (PostgreSQL; on SQLite writes take turns and
it finds the row), and it runs again and replaces.
"""

from __future__ import annotations

from typing import Final

from parley.db.repos import agents as agent_repo
from parley.db.repos import projects as project_repo
from parley.errors import AgentNotFound, NameTaken
from parley.records import Actor, Agent, AgentPatch, AgentSpec, Delivery, DeliveryPatch
from parley.services.agents import UNIQUE_VIOLATIONS, check_spec, insert_agent, update_locked
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.services.voices import SpeechCatalog

DELIVERY_FIELDS: Final = Delivery.__slots__

UPSERT_ATTEMPTS: Final = 3
"""An upsert whose insert lost a race runs again (and then replaces)."""


async def upsert_agent(
    ctx: Context,
    *,
    org_id: str,
    project: str | None,
    spec: AgentSpec,
    actor: Actor,
    speech: SpeechCatalog | None = None,
) -> tuple[Agent, bool]:
    """Create the agent `spec` names in a project (default `main`), or replace every field
    of the one that exists (see the module doc); return it and whether it was inserted."""
    check_spec(spec, speech)
    for attempt in range(1, UPSERT_ATTEMPTS + 1):
        try:
            async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
                in_project = await project_repo.resolve(session, org_id, project or MAIN_PROJECT)
                try:
                    found = await agent_repo.find(
                        session, org_id, spec.name, project_id=in_project.id, for_update=True
                    )
                except AgentNotFound:
                    return await insert_agent(session, ctx, org_id, in_project, spec, actor), True
                replacing = replacement(spec)
                return await update_locked(session, ctx, found, replacing, actor), False
        except NameTaken:  # another upsert inserted it meanwhile: replace it now
            if attempt == UPSERT_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def replacement(spec: AgentSpec) -> AgentPatch:
    """The update that makes an agent what `spec` describes (every field set)."""
    return AgentPatch(
        **{name: getattr(spec, name) for name in AgentSpec.__slots__ if name != "delivery"},
        delivery=DeliveryPatch(**{name: getattr(spec.delivery, name) for name in DELIVERY_FIELDS}),
    )
