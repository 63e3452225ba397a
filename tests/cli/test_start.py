"""The command line starts fast: commands load only the layers they use (bench/cli_start.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from parley.cli import tokens
from parley.jwt import mint

HEAVY = ["fastapi", "uvicorn", "scipy", "numpy", "sqlalchemy", "alembic", "redis", "httpx",
         "parley.app", "parley.api", "parley.engine", "parley.services", "parley.db"]  # fmt: skip

PROBE = """
import runpy, sys
sys.argv = ["parley", *{argv!r}]
try:
    runpy.run_module("parley", run_name="__main__")
except SystemExit as exit:
    code = exit.code
else:
    code = 0
heavy = {heavy!r}
print(repr(sorted(m for m in heavy if m in sys.modules)))
sys.exit(code)
"""


def loaded_heavy_modules(argv: list[str], cwd: Path) -> list[str]:
    code = PROBE.format(argv=argv, heavy=HEAVY)
    result = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
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
