"""A server process freezes its startup heap and keeps its log records lean; an app built
for tests does neither (composition/heap.py)."""

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


def run_probe(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter (no PARLEY_* settings, no speech model); it must
    succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PARLEY_STT"] = "none"
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_server_process_freezes_startup_heap(tmp_path: Path) -> None:
    done = run_probe(PROBE, tmp_path)

    for_tests, for_serving = (int(line) for line in done.stdout.split())
    assert for_tests == 0
    assert for_serving > 50_000  # the modules, the app and its context


LOG_PROBE = """
import logging, sys
from parley.app import create_app, create_app_from_env
from parley.config import Settings

def line_and_record():
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("parley.access")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    kept = []
    logger.addFilter(lambda record: kept.append(record) or True)
    logger.info('%s "%s %s" %s', "127.0.0.1", "GET", "/health", 200)
    record = kept[-1]
    print(record.funcName, record.lineno, record.threadName, record.processName)

create_app(Settings())
line_and_record()
create_app_from_env()
line_and_record()
"""


def test_server_process_log_records_lean_lines_unchanged(tmp_path: Path) -> None:
    done = run_probe(LOG_PROBE, tmp_path)

    line = 'INFO parley.access: 127.0.0.1 "GET /health" 200'
    first_line, for_tests, second_line, for_serving = done.stdout.splitlines()
    assert first_line == second_line == line  # what a server line shows is unchanged
    assert for_tests.split()[0] == "line_and_record"  # a test process keeps where and who
    assert for_serving == "(unknown function) 0 None None"  # a server process skips them
