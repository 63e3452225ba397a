"""parley.outbound's public surface: sorted, complete, cheap to import and self-contained."""

from __future__ import annotations

import inspect
import subprocess
import sys

import parley.outbound


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, name


def test_outbound_all_is_sorted() -> None:
    assert parley.outbound.__all__ == sorted(parley.outbound.__all__, key=isort_key)


def test_outbound_all_lists_every_public_name() -> None:
    public = {
        name
        for name, value in vars(parley.outbound).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(parley.outbound.__all__)


def test_outbound_import_loads_no_http_client_and_no_upper_layer() -> None:
    """The JWT kernel imports the policy; the customer-side tools must not load httpx."""
    forbidden = ["httpx", "sqlalchemy", "parley.jwt", "parley.db", "parley.services",
                 "parley.records", "parley.config", "fastapi"]  # fmt: skip
    code = (
        f"import sys, parley.outbound\nprint(sorted(m for m in {forbidden!r} if m in sys.modules))"
    )
    result = subprocess.run(  # noqa: S603 - fixed code, this interpreter
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
