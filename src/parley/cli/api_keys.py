"""`parley api-keys`: API keys of an organization."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from parley.cli.common import JsonOption, emit, load_settings, run_with_database
from parley.clock import isoformat

if TYPE_CHECKING:
    from parley.records import IssuedApiKey
    from parley.services import DatabaseContext

app = typer.Typer(help="Manage API keys.", no_args_is_help=True, rich_markup_mode=None)


@app.command("create")
def create(
    org: str = typer.Option(..., "--org", help="Organization ID or name."),
    name: str | None = typer.Option(None, "--name", help="A label for the key."),
    as_json: bool = JsonOption,
) -> None:
    """Create an API key; its secret is printed once."""
    from parley.records import OPERATOR
    from parley.services import api_keys, orgs

    async def use(ctx: DatabaseContext) -> IssuedApiKey:
        found = await orgs.find_org(ctx, id_or_name=org)
        return await api_keys.create_api_key(ctx, org_id=found.id, name=name, actor=OPERATOR)

    issued = run_with_database(load_settings(), use, as_json=as_json)
    key = issued.api_key
    value = {
        "api_key": {
            "id": key.id,
            "name": key.name,
            "prefix": key.prefix,
            "last4": key.last4,
            "created_at": isoformat(key.created_at),
        },
        "secret": issued.secret,
    }
    emit(value, as_json=as_json, text=f"Created API key {issued.api_key.id}:\n  {issued.secret}")
