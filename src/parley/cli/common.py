"""What the operator commands share: settings, a migrated database, JSON or text output.

Start-up time matters for a command line: this module, like every `parley.cli` module,
imports the heavy layers (the app, the database, the services) inside the functions that
need them, so `parley --help`, `parley keys …` and `parley token …` never load them
(bench/cli_start.py measures it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer

if TYPE_CHECKING:
    from parley.config import Settings
    from parley.services import Context

T = TypeVar("T")

JsonOption = typer.Option(False, "--json", help="Print the result as JSON.")


def load_settings() -> Settings:
    """Read the settings, or exit with the validation message."""
    from parley.config import Settings

    try:
        return Settings()
    except ValueError as error:
        typer.echo(f"error: invalid configuration: {error}", err=True)
        raise typer.Exit(2) from None


def run_with_context(
    settings: Settings, use: Callable[[Context], Awaitable[T]], *, as_json: bool = False
) -> T:
    """Migrate the database, run `use` with a services context, and close everything."""
    import asyncio

    from parley.clock import SystemClock
    from parley.errors import ParleyError
    from parley.options import runtime_options
    from parley.services.runtime import open_context

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
    from parley.db.engine import create_engine
    from parley.db.migrate import upgrade_if_needed

    engine = create_engine(url)
    try:
        await upgrade_if_needed(engine)
    finally:
        await engine.dispose()


def emit(value: dict[str, Any], *, as_json: bool, text: str) -> None:
    """Print `value` as JSON, or `text` for a person."""
    print(json.dumps(value, indent=2) if as_json else text)
