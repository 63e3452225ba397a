"""parley.jwt's public surface: sorted, complete, and free of the layers above it."""

from __future__ import annotations

import inspect
import subprocess
import sys

import parley.jwt


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, name


def test_all_is_sorted() -> None:
    assert parley.jwt.__all__ == sorted(parley.jwt.__all__, key=isort_key)


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name, value in vars(parley.jwt).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(parley.jwt.__all__)


def test_import_pulls_in_no_upper_layer() -> None:
    forbidden = ["sqlalchemy", "parley.db", "parley.services", "parley.api", "parley.config",
                 "parley.app", "fastapi"]  # fmt: skip
    code = (
        "import sys, parley.jwt, parley.jwt.cache, parley.jwt.jwks, parley.jwt.mint\n"
        f"print(sorted(m for m in {forbidden!r} if m in sys.modules))"
    )
    result = subprocess.run(  # noqa: S603 - fixed code, this interpreter
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
