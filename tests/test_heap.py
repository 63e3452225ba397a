"""A server process freezes its startup heap; an app built for tests does not
(composition/heap.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import asyncio, gc
from parley.app import create_app, create_app_from_env
from parley.config import Settings

async def started(app):
    async with app.router.lifespan_context(app):
        return gc.get_freeze_count()

print(asyncio.run(started(create_app(Settings()))))
print(asyncio.run(started(create_app_from_env())))
"""


def test_server_process_freezes_startup_heap(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PARLEY_STT"] = "none"
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    for_tests, for_serving = (int(line) for line in done.stdout.split())
    assert for_tests == 0
    assert for_serving > 50_000  # the modules, the app and its context
