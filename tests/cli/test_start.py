"""The command line starts fast: commands load only the layers they use (bench/cli_start.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parley.cli import tokens
from parley.jwt import mint

# What the operator commands (database only: composition/database.py) never need: the
# web app, the JWT kernel and its HTTP client, Redis, the engine, and Alembic once the schema
# is current.
NOT_FOR_OPERATORS = ["alembic", "cryptography", "fastapi", "httpx", "numpy", "redis", "uvicorn",
                     "parley.api", "parley.app", "parley.composition.context", "parley.engine",
                     "parley.jwt", "parley.services.authn",
                     "parley.services.runtime", "parley.stores.redis", "parley.web"]  # fmt: skip
HEAVY = ["fastapi", "uvicorn", "scipy", "numpy", "sqlalchemy", "alembic", "redis", "httpx",
         "parley.app", "parley.api", "parley.engine", "parley.services", "parley.db"]  # fmt: skip

RUN_PARLEY = """
import gc, runpy, sys
sys.argv = ["parley", *{argv!r}]
try:
    runpy.run_module("parley", run_name="__main__")
except SystemExit as exit:
    code = exit.code
else:
    code = 0
"""
"""Run the command line in this process as `parley ARGV` would; `code` is its exit code.
A probe appends what it reports (format with `argv`)."""

PROBE = (
    RUN_PARLEY
    + """
heavy = {heavy!r}
print(repr(sorted(m for m in heavy if m in sys.modules)))
sys.exit(code)
"""
)


def loaded_heavy_modules(
    argv: list[str], cwd: Path, *, heavy: list[str] = HEAVY, env: dict[str, str] | None = None
) -> list[str]:
    code = PROBE.format(argv=argv, heavy=heavy)
    result = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - our repr
    return loaded


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["serve", "--help"], ["orgs", "create", "--help"], ["keys", "generate", "--help"]],
    ids=["help", "serve-help", "orgs-help", "keys-help"],
)
def test_cli_help_loads_no_heavy_module(argv: list[str], tmp_path: Path) -> None:
    assert loaded_heavy_modules(argv, tmp_path) == []


def test_cli_keys_and_token_load_no_database_or_web_module(tmp_path: Path) -> None:
    assert loaded_heavy_modules(["keys", "generate", "--out", "k"], tmp_path) == []
    kid = json.loads((tmp_path / "k" / "jwks.json").read_text())["keys"][0]["kid"]
    mint_argv = ["token", "mint", "--key", "k/private_key.pem", "--kid", kid, "--iss", "i",
                 "--aud", "a", "--sub", "s", "--conversation-id", "c"]  # fmt: skip
    assert loaded_heavy_modules(mint_argv, tmp_path) == []


def test_cli_token_default_ttl_is_the_kernels() -> None:
    assert tokens.DEFAULT_TTL_SECONDS == mint.DEFAULT_TTL_SECONDS


def test_cli_operator_commands_open_database_only(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PARLEY_DATABASE_URL"] = f"sqlite:///{tmp_path / 'parley.db'}"
    commands = [["orgs", "create", "acme"], ["api-keys", "create", "--org", "acme"],
                ["audit", "verify", "--org", "acme"]]  # fmt: skip
    no_engine = [*NOT_FOR_OPERATORS, "sqlalchemy.ext.asyncio", "sqlalchemy.orm", "parley.db.tables"]
    # The first migration creates the schema with Alembic; afterwards it is not loaded.
    assert loaded_heavy_modules(["migrate"], tmp_path, heavy=["alembic"], env=env) == ["alembic"]

    for argv in commands:
        assert loaded_heavy_modules(argv, tmp_path, heavy=NOT_FOR_OPERATORS, env=env) == [], argv
    # On a current schema, `migrate` asks the driver and opens no engine.
    assert loaded_heavy_modules(["migrate"], tmp_path, heavy=no_engine, env=env) == []


GC_PROBE = (
    RUN_PARLEY.format(argv=["--help"])
    + """
print(code, gc.get_threshold(), gc.get_freeze_count() > 0)
"""
)


def test_cli_command_collects_less_often_and_freezes_at_exit() -> None:
    """A command collects cycles every 10,000 allocations, and what exists at its end is
    frozen, so the interpreter's exit does not walk it (0.1 s, bench/cli_start.py)."""
    result = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", GC_PROBE], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "0 (10000, 10, 10) True"
