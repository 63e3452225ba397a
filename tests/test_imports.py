"""Importing the JWT kernel or the services loads no Redis client (issue #11: `parley.stores`
exports only its Protocols; the composition root picks the implementations)."""

from __future__ import annotations

import subprocess
import sys


def loaded_after(*modules: str) -> set[str]:
    code = (
        f"import sys; import {', '.join(modules)}; "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('redis', 'parley')))"
    )
    run = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(run.stdout.split())


def test_imports_jwt_kernel_loads_no_redis() -> None:
    loaded = loaded_after("parley.jwt", "parley.jwt.mint", "parley.stores")
    assert "redis" not in loaded
    assert "parley.stores.redis" not in loaded


def test_imports_services_load_no_store_implementation() -> None:
    loaded = loaded_after("parley.services.authn", "parley.services.conversations")
    assert not {"redis", "parley.stores.redis", "parley.stores.memory"} & loaded
