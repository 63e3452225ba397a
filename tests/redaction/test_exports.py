"""parley.redaction's public surface: sorted, complete, and pure (nothing of the layers above,
no I/O library)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import parley.redaction


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, name


def test_redaction_all_is_sorted() -> None:
    assert parley.redaction.__all__ == sorted(parley.redaction.__all__, key=isort_key)


def test_redaction_all_lists_every_public_name() -> None:
    public = {
        name
        for name, value in vars(parley.redaction).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(parley.redaction.__all__)


def test_redaction_import_loads_nothing_of_the_layers_above_and_no_io() -> None:
    forbidden = ["parley.services", "parley.db", "parley.api", "parley.web", "parley.stores",
                 "parley.engine", "parley.config", "sqlalchemy", "httpx", "aiohttp",
                 "anyio"]  # fmt: skip
    code = (
        f"import sys, parley.redaction\nprint(sorted(m for m in {forbidden!r} if m in sys.modules))"
    )
    result = subprocess.run(  # noqa: S603 - fixed code, this interpreter
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
