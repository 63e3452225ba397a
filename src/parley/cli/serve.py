"""`parley serve` and `parley migrate`."""

from __future__ import annotations

import asyncio
import logging

import typer
import uvicorn

from parley.app import HTTP_PROTOCOL
from parley.cli.common import load_settings, migrate_database, run_with_context
from parley.services import Context, orgs
from parley.services.live import MAX_MESSAGE_BYTES


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes (needs Redis above 1)."),
) -> None:
    """Migrate the database, create the first organization if there is none, and serve."""
    settings = load_settings()
    if workers > 1 and not settings.distributed:
        typer.echo(
            "error: --workers above 1 needs PARLEY_REDIS_URL: in-process stores are not "
            "shared between processes",
            err=True,
        )
        raise typer.Exit(2)

    async def bootstrap(ctx: Context) -> orgs.NewOrganization | None:
        return await orgs.bootstrap(ctx)

    created = run_with_context(settings, bootstrap)
    if created is not None:
        typer.echo(
            f"Created organization {created.org.name!r} ({created.org.id}). "
            "Its first API key, shown only this once:\n\n"
            f"    {created.api_key.secret}\n"
        )
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run(
        "parley.app:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        loop="uvloop",
        http=HTTP_PROTOCOL,
        ws="websockets-sansio",
        # API.md section 8: a frame over 1 MiB closes the socket with 1009.
        ws_max_size=MAX_MESSAGE_BYTES,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        log_level=settings.log_level,
    )


def migrate() -> None:
    """Migrate the database to the newest schema."""
    settings = load_settings()

    asyncio.run(migrate_database(settings.database_url))
    typer.echo("The database is at the newest schema.")
