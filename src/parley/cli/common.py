"""What the operator commands share: settings, start-up checks, running, output.

The context a command runs with is built by `parley.composition` (options, context,
database); this module adds the checks and the messages a command line owes its operator.

Start-up time matters for a command line: this module, like every `parley.cli` module,
imports the heavy layers (the app, the database, the services) inside the functions that
need them, so `parley --help`, `parley keys …` and `parley token …` never load them
(bench/cli_start.py measures it).

Misconfiguration ends a command with one clear message on stderr that names the variable
and its value (passwords masked) and no traceback (`parley serve --debug` shows it):

- exit 2: a `PARLEY_*` value is invalid (one line per variable), or a `PARLEY_*` variable
  is not a setting at all (a misspelling: the line names the closest setting);
- exit 3: the database, Redis or the secret key file named by the configuration cannot be
  used;
- exit 1: the command itself was refused (e.g. a name already taken) or failed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import urlsplit, urlunsplit

import typer

if TYPE_CHECKING:
    import asyncio

    from pydantic import ValidationError

    from parley.config import Settings
    from parley.services import Context, DatabaseContext

T = TypeVar("T")

JsonOption = typer.Option(False, "--json", help="Print the result as JSON.")
EXIT_FAILED, EXIT_INVALID_CONFIGURATION, EXIT_DEPENDENCY_UNAVAILABLE = 1, 2, 3
SECRET_VARIABLES = frozenset({"PARLEY_METRICS_TOKEN", "PARLEY_LLM_API_KEY", "PARLEY_SECRET_KEY"})
_debug = False


def set_debug(enabled: bool) -> None:
    """Show tracebacks of unexpected failures (`parley serve --debug`)."""
    global _debug
    _debug = enabled


def fail(message: str, code: int) -> NoReturn:
    """Print `error: message` on stderr and end the command with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def mask_url(value: str) -> str:
    """Return the URL with its password replaced by `****` (and unchanged otherwise)."""
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return value
    if not password:
        return value
    netloc = parts.netloc.replace(f":{password}@", ":****@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def shown_value(variable: str, value: object) -> str:
    """How a variable's value appears in a message: secrets hidden, URLs masked."""
    if variable in SECRET_VARIABLES:
        return "'****'"
    text = mask_url(value) if isinstance(value, str) else repr(value)
    if len(text) > 120:
        text = text[:117] + "..."
    return repr(text) if isinstance(value, str) else text


def database_url_as_set(settings: Settings) -> str:
    """`PARLEY_DATABASE_URL=value` as the operator wrote it (environment, then `./.env`,
    password masked); when it is unset, the documented default, said to be the default
    (not the driver spelling the settings hold)."""
    value = os.environ.get("PARLEY_DATABASE_URL") or _env_file_value("PARLEY_DATABASE_URL")
    if value:
        return f"PARLEY_DATABASE_URL={mask_url(value)}"
    if settings.database_url != _normalized_default():  # set by a way not read above
        return f"PARLEY_DATABASE_URL={mask_url(settings.database_url)}"
    from parley.cli.environment import VARIABLES

    default = next(default for name, default, _ in VARIABLES if name == "PARLEY_DATABASE_URL")
    return f"PARLEY_DATABASE_URL is unset, so the default {default} is used"


def _env_file_value(variable: str) -> str | None:
    path = Path(".env")
    if not path.is_file():
        return None
    from dotenv import dotenv_values

    return dotenv_values(path).get(variable)


def _normalized_default() -> str:
    from parley.config import DEFAULT_DATABASE_URL

    return DEFAULT_DATABASE_URL


def load_settings() -> Settings:
    """Read the settings, or exit 2 with one line per invalid variable."""
    from pydantic import ValidationError

    from parley.config import Settings

    if unparsable := _unparsable_env_lines(Path(".env")):
        lines = ", ".join(map(str, unparsable))
        fail(
            f"invalid configuration: ./.env cannot be parsed at line {lines} (expected "
            "NAME=value): fix it, or nothing of it would apply",
            EXIT_INVALID_CONFIGURATION,
        )
    refuse_unknown_variables(Settings, env_file=Path(".env"))
    try:
        return Settings()
    except ValidationError as error:
        fail(_validation_lines(error), EXIT_INVALID_CONFIGURATION)
    except ValueError as error:  # e.g. a .env file that cannot be parsed
        fail(f"invalid configuration: {error}", EXIT_INVALID_CONFIGURATION)


def refuse_unknown_variables(settings_class: type[Settings], *, env_file: Path) -> None:
    """Exit 2 with one line per `PARLEY_*` variable (environment or `.env`) that is not a
    setting, naming the closest setting (parley/cli/variables.py)."""
    from dotenv import dotenv_values

    from parley.cli.variables import refusal_lines, setting_variables, unknown_variables

    sources = {"the environment": list(os.environ)}
    if env_file.is_file():
        sources[f"./{env_file}"] = list(dotenv_values(env_file))
    unknown = unknown_variables(sources, setting_variables(settings_class))
    if unknown:
        fail("\nerror: ".join(refusal_lines(unknown)), EXIT_INVALID_CONFIGURATION)


def _unparsable_env_lines(path: Path) -> list[int]:
    """The lines of a `.env` file that python-dotenv would skip with only a warning (their
    text is not shown: it may hold a secret)."""
    if not path.is_file():
        return []
    from dotenv.parser import parse_stream

    try:
        with path.open(encoding="utf-8") as stream:
            return [binding.original.line for binding in parse_stream(stream) if binding.error]
    except (OSError, UnicodeDecodeError) as error:
        fail(f"invalid configuration: ./.env cannot be read ({error})", EXIT_INVALID_CONFIGURATION)


def _validation_lines(error: ValidationError) -> str:
    lines = ["invalid configuration:"]
    for item in error.errors():
        message = str(item.get("msg", "is invalid")).removeprefix("Value error, ")
        if not item.get("loc"):
            # A rule across variables: its message names them; its input is every value
            # (secrets included), so none is shown.
            lines.append(f"  {message}")
            continue
        variable = f"PARLEY_{str(item['loc'][0]).upper()}"
        message = message.removeprefix(f"{variable} ")
        value = shown_value(variable, item.get("input"))
        lines.append(f"  {variable}={value}: {message}")
    return "\n".join(lines)


async def check_dependencies(settings: Settings) -> None:
    """Open the database and ping Redis once; exit 3 with the reason if either fails."""
    from parley.db.probe import DatabaseProbeFailed, probe_database
    from parley.stores.probe import RedisProbeFailed, probe_redis

    try:
        await probe_database(settings.database_url)
    except DatabaseProbeFailed as error:
        _trace(error)
        fail(f"{database_url_as_set(settings)}: {error}", EXIT_DEPENDENCY_UNAVAILABLE)
    if settings.redis_url is not None:
        try:
            await probe_redis(settings.redis_url)
        except RedisProbeFailed as error:
            _trace(error)
            value = mask_url(settings.redis_url)
            fail(
                f"PARLEY_REDIS_URL={value}: {error}. Parley does not start without the Redis "
                "it is configured with (unset PARLEY_REDIS_URL for in-process stores)",
                EXIT_DEPENDENCY_UNAVAILABLE,
            )


def check_secret_key(settings: Settings) -> None:
    """Read (or on the first start create) the key file when PARLEY_SECRET_KEY is unset;
    exit 3 naming the file if it cannot be used."""
    from parley.sealing import SecretKeyUnavailable, open_secret_box

    secret = settings.secret_key.get_secret_value() if settings.secret_key else None
    try:
        open_secret_box(secret, database_url=settings.database_url)
    except SecretKeyUnavailable as error:
        fail(
            f"the secret key file {error.message}. Fix its permissions, or set PARLEY_SECRET_KEY",
            EXIT_DEPENDENCY_UNAVAILABLE,
        )


def _trace(error: BaseException) -> None:
    """With --debug, print the traceback of the driver error behind a probe's message."""
    if _debug:
        import traceback

        traceback.print_exception(error.__cause__ or error, file=sys.stderr)


def run_with_context(
    settings: Settings, use: Callable[[Context], Awaitable[T]], *, as_json: bool = False
) -> T:
    """Check the dependencies, migrate the database, run `use` with a services context."""
    from parley.clock import SystemClock
    from parley.composition.context import open_context
    from parley.composition.options import runtime_options
    from parley.composition.schema import migrate_database

    async def main() -> T:
        await check_dependencies(settings)
        check_secret_key(settings)
        await migrate_database(settings.database_url)
        async with open_context(runtime_options(settings), clock=SystemClock()) as ctx:
            return await use(ctx)

    return run(main(), settings, as_json=as_json)


def run_with_database(
    settings: Settings, use: Callable[[DatabaseContext], Awaitable[T]], *, as_json: bool = False
) -> T:
    """Check the dependencies, migrate the database, run `use` with the database only.

    For the operator commands: no HTTP client, JWT runtime or stores are opened, and one
    engine serves the migration check and the command.
    """
    from parley.clock import SystemClock
    from parley.composition.database import open_database_context
    from parley.composition.options import database_options

    async def main() -> T:
        await check_dependencies(settings)
        async with open_database_context(database_options(settings), clock=SystemClock()) as ctx:
            return await use(ctx)

    return run(main(), settings, as_json=as_json)


def run_migration(settings: Settings) -> None:
    """Check the dependencies and migrate the database (`parley migrate`)."""
    from parley.composition.schema import migrate_database

    async def main() -> None:
        await check_dependencies(settings)
        await migrate_database(settings.database_url)

    run(main(), settings)


def run(
    work: Awaitable[T],
    settings: Settings,
    *,
    as_json: bool = False,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """Run `work` to completion (on `loop_factory`'s loop, asyncio's by default); turn
    failures into a message and an exit code."""
    import asyncio

    from parley.db.migrate import MigrationFailed
    from parley.errors import ParleyError

    async def main() -> T:
        return await work

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main())
    except MigrationFailed as error:
        _trace(error)
        fail(
            f"{database_url_as_set(settings)}: the schema could not be brought up to date: {error}",
            EXIT_DEPENDENCY_UNAVAILABLE,
        )
    except ParleyError as error:
        _print_refusal(error, as_json=as_json)
        raise typer.Exit(EXIT_FAILED) from None
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as error:
        if _debug:
            raise
        first_line = (mask_url(str(error)).splitlines() or [""])[0]
        fail(
            f"{type(error).__name__}: {first_line} (`parley serve --debug` shows the traceback)",
            EXIT_FAILED,
        )


def _print_refusal(error: Any, *, as_json: bool) -> None:
    if as_json:
        body = {"error": {"message": error.message, "code": error.code}}
        if error.param_errors:
            body["param_errors"] = error.param_errors
        print(json.dumps(body), file=sys.stderr)
        return
    print(f"error: {error.message} ({error.code})", file=sys.stderr)
    for field, message in (error.param_errors or {}).items():
        print(f"  {field}: {message}", file=sys.stderr)


def emit(value: dict[str, Any], *, as_json: bool, text: str) -> None:
    """Print `value` as JSON, or `text` for a person."""
    print(json.dumps(value, indent=2) if as_json else text)
