"""`parley orgs`: organizations, created by the operator."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from parley.cli.common import JsonOption, emit, load_settings, run_with_database

if TYPE_CHECKING:
    from parley.services import DatabaseContext
    from parley.services.orgs import NewOrganization

app = typer.Typer(help="Manage organizations.", no_args_is_help=True, rich_markup_mode=None)


@app.command("create")
def create(
    name: str = typer.Argument(..., help="Organization name (a-z, 0-9, '-', '_')."),
    as_json: bool = JsonOption,
) -> None:
    """Create an organization with its `main` project and a first API key."""
    from parley.services import orgs

    async def use(ctx: DatabaseContext) -> NewOrganization:
        return await orgs.create_org(ctx, name=name)

    created = run_with_database(load_settings(), use, as_json=as_json)
    value = {
        "org": {"id": created.org.id, "name": created.org.name},
        "api_key": created.api_key.secret,
    }
    text = (
        f"Created organization {created.org.name} ({created.org.id}).\n"
        f"Its first API key, shown once:\n  {created.api_key.secret}\n"
        f"Lost it? Make another: parley api-keys create --org {created.org.name}"
    )
    emit(value, as_json=as_json, text=text)
