"""Builders that go through the services, as the product does."""

from __future__ import annotations

import secrets

from parley.services import Context, orgs
from parley.services.orgs import NewOrganization


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


async def make_org(ctx: Context, name: str | None = None) -> NewOrganization:
    """Create an organization (with `main` and a first API key) through the service."""
    return await orgs.create_org(ctx, name=name or unique_name("org"))
