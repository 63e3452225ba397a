"""What the operator commands share: settings, a migrated database, JSON or text output."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import typer

from parley.app import runtime_options
from parley.clock import SystemClock
from parley.config import Settings
from parley.db.engine import create_engine
from parley.db.migrate import upgrade
from parley.errors import ParleyError
from parley.services import Context
from parley.services.runtime import open_context

T = TypeVar("T")

JsonOption = typer.Option(False, "--json", help="Print the result as JSON.")


def load_settings() -> Settings:
    """Read the settings, or exit with the validation message."""
    try:
        return Settings()
    except ValueError as error:
        typer.echo(f"error: invalid configuration: {error}", err=True)
        raise typer.Exit(2) from None


def run_with_context(
    settings: Settings, use: Callable[[Context], Awaitable[T]], *, as_json: bool = False
) -> T:
    """Migrate the database, run `use` with a services context, and close everything."""

    async def main() -> T:
        await migrate_database(settings.database_url)
        async with open_context(runtime_options(settings), clock=SystemClock()) as ctx:
            return await use(ctx)

    try:
        return asyncio.run(main())
    except ParleyError as error:
        if as_json:
            body = {"error": {"message": error.message, "code": error.code}}
            if error.param_errors:
                body["param_errors"] = error.param_errors
            print(json.dumps(body), file=sys.stderr)
        else:
            print(f"error: {error.message} ({error.code})", file=sys.stderr)
            for field, message in (error.param_errors or {}).items():
                print(f"  {field}: {message}", file=sys.stderr)
        raise typer.Exit(1) from None


async def migrate_database(url: str) -> None:
    """Bring the database at `url` to the newest schema."""
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


def emit(value: dict[str, Any], *, as_json: bool, text: str) -> None:
    """Print `value` as JSON, or `text` for a person."""
    print(json.dumps(value, indent=2) if as_json else text)
