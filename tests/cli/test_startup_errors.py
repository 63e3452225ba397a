"""Misconfiguration stops `parley` at start-up with one clear line: the variable, its value
(password masked), the reason, no traceback (unless `--debug`), and a non-zero exit.

Each test runs the real command line in a subprocess, as an operator would.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from tests import databases
from tests.ports import free_port

from parley.cli.environment import VARIABLES
from parley.cli.variables import setting_variables
from parley.config import Settings

PASSWORD = "s3cret-pw"


def parley(
    *args: str, cwd: Path, timeout: float = 60, **variables: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.update(variables)
    return subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "parley", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_clear_refusal(result: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    for part in parts:
        assert part in result.stderr, (part, result.stderr)
    assert PASSWORD not in result.stderr
    assert PASSWORD not in result.stdout


def postgres_url(**parts: str) -> str:
    admin = databases.postgres_admin_url()
    if admin is None:
        pytest.fail("this test needs the PostgreSQL named by PARLEY_TEST_DATABASE_URL")
    url = make_url(admin).set(drivername="postgresql", **parts)  # type: ignore[arg-type]
    return url.render_as_string(hide_password=False)


def test_serve_postgres_closed_port_names_variable_and_masks_password(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://parley:{PASSWORD}@127.0.0.1:{port}/parley"
    result = parley("serve", "--port", str(free_port()), cwd=tmp_path, PARLEY_DATABASE_URL=url)
    assert_clear_refusal(
        result,
        3,
        f"PARLEY_DATABASE_URL=postgresql://parley:****@127.0.0.1:{port}/parley",
        f"cannot connect to PostgreSQL at 127.0.0.1:{port} (connection refused",
    )
    assert "Try again later" not in result.stderr


@pytest.mark.postgres
def test_serve_postgres_unknown_role_names_the_role(tmp_path: Path) -> None:
    url = postgres_url(username="no_such_role_7f3a", password=PASSWORD)
    result = parley("serve", "--port", str(free_port()), cwd=tmp_path, PARLEY_DATABASE_URL=url)
    assert_clear_refusal(
        result, 3, "PARLEY_DATABASE_URL=postgresql://no_such_role_7f3a:****@", "no_such_role_7f3a"
    )


@pytest.mark.postgres
def test_serve_postgres_unknown_database_names_the_database(tmp_path: Path) -> None:
    url = postgres_url(database="no_such_database_7f3a")
    result = parley("serve", "--port", str(free_port()), cwd=tmp_path, PARLEY_DATABASE_URL=url)
    assert_clear_refusal(
        result, 3, "PARLEY_DATABASE_URL=", 'database "no_such_database_7f3a" does not exist'
    )


def test_serve_sqlite_missing_directory_names_the_directory(tmp_path: Path) -> None:
    url = "sqlite:///missing/dir/parley.db"
    result = parley("serve", "--port", str(free_port()), cwd=tmp_path, PARLEY_DATABASE_URL=url)
    assert_clear_refusal(
        result,
        3,
        "PARLEY_DATABASE_URL=sqlite:///missing/dir/parley.db",
        f"the directory {tmp_path / 'missing' / 'dir'} does not exist",
    )
    assert "OperationalError" not in result.stderr


def test_serve_sqlite_file_not_a_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "parley.db").write_text("not a database, just text" * 100)
    result = parley("migrate", cwd=tmp_path, PARLEY_DATABASE_URL="sqlite:///parley.db")
    assert_clear_refusal(result, 3, "PARLEY_DATABASE_URL=sqlite:///parley.db", "not a usable")


def test_serve_redis_closed_port_refuses_to_start(tmp_path: Path) -> None:
    port = free_port()
    result = parley(
        "serve",
        "--port",
        str(free_port()),
        cwd=tmp_path,
        PARLEY_DATABASE_URL="sqlite:///parley.db",
        PARLEY_REDIS_URL=f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
    )
    assert_clear_refusal(
        result,
        3,
        f"PARLEY_REDIS_URL=redis://:****@127.0.0.1:{port}/0",
        f"cannot connect to Redis at 127.0.0.1:{port} (connection refused",
        "does not start",
    )


@pytest.mark.parametrize(
    ("variable", "value", "shown", "reason"),
    [
        ("PARLEY_JWT_RATE_BURST", "abc", "'abc'", "valid integer"),
        ("PARLEY_JWT_MAX_LIFETIME_SECONDS", "5", "'5'", "greater than or equal to 60"),
        ("PARLEY_JWKS_ALLOW_HTTP", "maybe", "'maybe'", "valid boolean"),
        ("PARLEY_STT_BEAM_SIZE", "0", "'0'", "greater than or equal to 1"),
        ("PARLEY_STT_BEAM_SIZE", "11", "'11'", "less than or equal to 10"),
        ("PARLEY_PUBLIC_URL", "ftp://x", "'ftp://x'", "absolute http(s) URL"),
        ("PARLEY_REDIS_URL", "http://h", "'http://h'", "redis://"),
        ("PARLEY_LOG_LEVEL", "loud", "'loud'", "must be one of"),
        (
            "PARLEY_DATABASE_URL",
            f"mysql://u:{PASSWORD}@h/d",
            "'mysql://u:****@h/d'",
            "must name SQLite or PostgreSQL",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("PARLEY_") else "",
)
def test_serve_invalid_setting_names_variable_and_value(
    tmp_path: Path, variable: str, value: str, shown: str, reason: str
) -> None:
    result = parley("serve", cwd=tmp_path, **{variable: value})
    assert_clear_refusal(result, 2, f"  {variable}={shown}: ", reason)


def test_serve_invalid_settings_one_line_per_variable(tmp_path: Path) -> None:
    result = parley(
        "serve",
        cwd=tmp_path,
        PARLEY_JWT_RATE_BURST="x",
        PARLEY_PUBLIC_URL="nope",
        PARLEY_LOG_LEVEL="?",
    )
    assert_clear_refusal(result, 2)
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "error: invalid configuration:"
    assert sorted(line.split("=")[0].strip() for line in lines[1:]) == [
        "PARLEY_JWT_RATE_BURST",
        "PARLEY_LOG_LEVEL",
        "PARLEY_PUBLIC_URL",
    ]


def test_serve_debug_shows_the_traceback(tmp_path: Path) -> None:
    url = f"postgresql://parley:{PASSWORD}@127.0.0.1:{free_port()}/parley"
    result = parley("serve", "--debug", cwd=tmp_path, PARLEY_DATABASE_URL=url)
    assert result.returncode == 3
    assert "Traceback" in result.stderr
    assert "ConnectionRefusedError" in result.stderr
    assert PASSWORD not in result.stderr


def test_serve_help_lists_environment_variables_with_defaults(tmp_path: Path) -> None:
    result = parley("serve", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name, default, _ in VARIABLES:
        line = next(line for line in result.stdout.splitlines() if f" {name} " in line)
        assert f"[default: {default}]" in line, line


def test_environment_help_matches_settings() -> None:
    fields = Settings.model_fields
    assert [name for name, _, _ in VARIABLES] == [f"PARLEY_{f.upper()}" for f in fields]
    built = Settings(_env_file=None)  # type: ignore[call-arg]
    for name, default, _ in VARIABLES:
        value = getattr(built, name.removeprefix("PARLEY_").lower())
        expected = {"unset": None, "false": False}.get(default, default)
        if name == "PARLEY_DATABASE_URL":
            value = value.replace("+aiosqlite", "")
        assert str(value) == str(expected) if expected is not None else value is None, name


def test_serve_first_key_message_tells_how_to_make_another(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PARLEY_DATABASE_URL"] = "sqlite:///parley.db"
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "parley", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "parley api-keys create --org default" in line:
                break
        text = "".join(seen)
        assert "Its first API key, shown only this once" in text, text
        assert "Lost it?" in text, text
        assert "parley api-keys create --org default" in text, text
    finally:
        stop(process)


def test_serve_rule_across_variables_names_them_and_shows_no_value(tmp_path: Path) -> None:
    """A rule across variables has every value as its input: none may be printed."""
    result = parley(
        "serve",
        cwd=tmp_path,
        PARLEY_LLM_BASE_URL="http://127.0.0.1:9/v1",
        PARLEY_LLM_API_KEY=PASSWORD,
        PARLEY_METRICS_TOKEN=PASSWORD * 3,
        PARLEY_DATABASE_URL=f"postgresql://parley:{PASSWORD}@127.0.0.1:5432/parley",
    )
    assert_clear_refusal(result, 2, "PARLEY_LLM_BASE_URL is set: set PARLEY_LLM_MODEL too")
    assert "PARLEY_?" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("PARLEY_DATABASE_URL", f"postgresql://u:{PASSWORD}@127.0.0.1:99999/d", "out of range"),
        ("PARLEY_DATABASE_URL", "postgresql://u@127.0.0.1:notaport/d", "notaport"),
        ("PARLEY_REDIS_URL", "redis://127.0.0.1:99999/0", "out of range"),
    ],
    ids=["database-port-range", "database-port-text", "redis-port-range"],
)
def test_serve_url_with_invalid_port_names_variable_exit_2(
    tmp_path: Path, variable: str, value: str, reason: str
) -> None:
    result = parley("serve", cwd=tmp_path, **{variable: value})
    assert_clear_refusal(result, 2, f"  {variable}=", "has an invalid port", reason)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
@pytest.mark.parametrize("command", [("serve",), ("migrate",), ("orgs", "create", "acme")])
def test_in_memory_sqlite_refused_exit_2(
    tmp_path: Path, url: str, command: tuple[str, ...]
) -> None:
    """An in-memory database is gone when the command ends: no key may be printed for it."""
    result = parley(*command, cwd=tmp_path, PARLEY_DATABASE_URL=url)
    assert_clear_refusal(result, 2, f"  PARLEY_DATABASE_URL='{url}': ", "in-memory")
    assert "parley_sk_" not in result.stdout


def test_serve_sqlite_file_that_cannot_be_created_names_it_exit_3(tmp_path: Path) -> None:
    """The directory exists, yet no file can be made there (even as root, in /proc)."""
    result = parley("serve", cwd=tmp_path, PARLEY_DATABASE_URL="sqlite:////proc/parley-test.db")
    assert_clear_refusal(
        result, 3, "PARLEY_DATABASE_URL=sqlite:////proc/parley-test.db", "cannot create"
    )
    assert "Try again later" not in result.stderr


@pytest.mark.postgres
def test_migrate_postgres_role_without_rights_names_variable_exit_3(tmp_path: Path) -> None:
    """A role that may connect but not create tables: exit 3 with the database's reason."""
    admin = databases.postgres_admin_url()
    if admin is None:
        pytest.fail("this test needs the PostgreSQL named by PARLEY_TEST_DATABASE_URL")
    suffix = secrets.token_hex(4)
    role, database = f"parley_norights_{suffix}", f"parley_norights_{suffix}"
    admin_dsn = make_url(admin).set(drivername="postgresql").render_as_string(hide_password=False)

    async def admin_sql(*statements: str) -> None:
        connection = await asyncpg.connect(admin_dsn)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(
        admin_sql(
            f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'",
            f"CREATE DATABASE {database}",
            f"REVOKE CREATE ON DATABASE {database} FROM PUBLIC",
        )
    )
    try:
        url = postgres_url(username=role, password=PASSWORD, database=database)
        result = parley("migrate", cwd=tmp_path, PARLEY_DATABASE_URL=url)
        assert_clear_refusal(
            result,
            3,
            f"PARLEY_DATABASE_URL=postgresql://{role}:****@",
            "the schema could not be brought up to date",
            "permission denied",
        )
    finally:
        asyncio.run(admin_sql(f"DROP DATABASE IF EXISTS {database}", f"DROP ROLE IF EXISTS {role}"))


def test_serve_env_file_that_cannot_be_parsed_refused_exit_2(tmp_path: Path) -> None:
    """python-dotenv skips a bad line with a warning: the service would start on defaults
    (a new database, a new key). The line's text is not shown: it may hold a secret."""
    (tmp_path / ".env").write_text(
        f"PARLEY_LOG_LEVEL=info\nPARLEY_LLM_API_KEY {PASSWORD}\nPARLEY_STT=none\n",
        encoding="utf-8",
    )
    result = parley("serve", cwd=tmp_path)
    assert_clear_refusal(result, 2, "./.env cannot be parsed at line 2")
    assert not (tmp_path / "parley.db").exists()


def test_serve_unwritable_default_database_names_the_documented_default(tmp_path: Path) -> None:
    """PARLEY_DATABASE_URL unset, in a directory where no file can be made (/proc, even as
    root): the message names the documented default and says it is the default."""
    result = parley("migrate", cwd=Path("/proc"))
    assert_clear_refusal(
        result, 3, "PARLEY_DATABASE_URL is unset, so the default sqlite:///parley.db is used"
    )
    assert "sqlite+aiosqlite" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("PARLEY_DATABSE_URL", "PARLEY_DATABASE_URL"),
        ("PARLEY_DB_URL", "PARLEY_DATABASE_URL"),
        ("PARLEY_REDIS", "PARLEY_REDIS_URL"),
    ],
)
def test_serve_unknown_variable_in_environment_names_closest_setting_exit_2(
    tmp_path: Path, variable: str, closest: str
) -> None:
    result = parley("serve", "--port", str(free_port()), cwd=tmp_path, **{variable: "x"})  # type: ignore[arg-type]
    assert_clear_refusal(result, 2, variable, "the environment", f"did you mean {closest}?")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "parley.db").exists()


def test_serve_unknown_variable_in_env_file_refused_exit_2(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PARLEY_STT=none\nPARLEY_LLM_URL=http://h\n", encoding="utf-8")
    result = parley("migrate", cwd=tmp_path)
    assert_clear_refusal(
        result, 2, "PARLEY_LLM_URL (in ./.env)", "did you mean PARLEY_LLM_BASE_URL?"
    )


def test_cli_test_suite_variables_are_not_settings_yet_accepted(tmp_path: Path) -> None:
    result = parley(
        "migrate", cwd=tmp_path, PARLEY_TEST_ANYTHING="1", PARLEY_DATABASE_URL="sqlite:///p.db"
    )
    assert result.returncode == 0, result.stderr


def test_setting_variables_follow_the_settings_class() -> None:
    """The known names come from the class: a setting added later is known at once."""

    class Wider(Settings):
        brand_new_option: int = 1

    assert "PARLEY_BRAND_NEW_OPTION" in setting_variables(Wider)
    assert setting_variables(Settings) == {
        f"PARLEY_{name.upper()}" for name in Settings.model_fields
    }


def test_serve_port_in_use_refused_before_anything_else_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = parley("serve", "--port", str(port), cwd=tmp_path)
        elapsed = time.monotonic() - started
    assert_clear_refusal(result, 2, f"--port {port}", "already in use")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "parley_sk_" not in result.stdout
    assert not (tmp_path / "parley.db").exists()  # no database made, no model loaded
    assert elapsed < 10


def stop(process: subprocess.Popen[str]) -> None:
    """Stop a `parley serve` the test no longer reads: SIGTERM, reading what it still
    prints (a full pipe would block its shutdown), then SIGKILL if it is not gone in 30 s
    (a loaded machine can hold it in its start-up, which a SIGTERM waits for)."""
    process.terminate()
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
