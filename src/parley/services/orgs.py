"""Organizations: created by the operator, each with a `main` project and a first API key."""

from __future__ import annotations

from dataclasses import dataclass

from parley.clock import utcnow
from parley.db.repos import orgs as org_repo
from parley.db.repos import projects as project_repo
from parley.errors import NameTaken, OrganizationNotFound, ValidationFailed
from parley.ids import NAME_RULE, is_valid_name, new_id
from parley.records import OPERATOR, SYSTEM, Actor, IssuedApiKey, Organization, Project
from parley.services import api_keys, audit
from parley.services.context import DatabaseContext

MAIN_PROJECT = "main"
DEFAULT_ORG = "default"
UNIQUE_VIOLATIONS = {
    "uq_organizations_name": NameTaken,
    "organizations.name": NameTaken,
    **project_repo.UNIQUE_VIOLATIONS,
}


@dataclass(frozen=True, slots=True)
class NewOrganization:
    org: Organization
    api_key: IssuedApiKey


async def create_org(
    ctx: DatabaseContext, *, name: str, actor: Actor = OPERATOR
) -> NewOrganization:
    """Create an organization with its `main` project and a first API key."""
    if not is_valid_name(name):
        raise ValidationFailed(param_errors={"name": NAME_RULE})
    now = utcnow(ctx.clock)
    org = Organization(id=new_id("org"), name=name, created_at=now)
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        if await org_repo.find(session, name) is not None:
            raise NameTaken("An organization with this name already exists.")
        await org_repo.insert(session, org)
        main = Project(id=new_id("proj"), org_id=org.id, name=MAIN_PROJECT, created_at=now)
        await project_repo.insert(session, main)
        await audit.record(
            session,
            ctx,
            org_id=org.id,
            actor=actor,
            action="org.create",
            target=org.id,
            details={"name": name},
        )
        issued = await api_keys.issue(session, ctx, org_id=org.id, name="first key", actor=actor)
    return NewOrganization(org=org, api_key=issued)


async def find_org(ctx: DatabaseContext, *, id_or_name: str) -> Organization:
    """Return the organization with this ID or name."""
    async with ctx.db.read() as session:
        org = await org_repo.find(session, id_or_name)
    if org is None:
        raise OrganizationNotFound()
    return org


async def bootstrap(ctx: DatabaseContext) -> NewOrganization | None:
    """On an empty database, create the `default` organization; otherwise do nothing."""
    async with ctx.db.transaction() as session:
        if await org_repo.any_exist(session):
            return None
    return await create_org(ctx, name=DEFAULT_ORG, actor=SYSTEM)
