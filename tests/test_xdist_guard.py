"""The suite under pytest-xdist (tests/xdist_guard.py, docs/testing.md): a crashed worker's
test is reported once with its stack, the rest of its group still runs, and a run cannot
wait forever (issue #38: a worker's crash left CI waiting until its limit)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

CRASHING = """
import os
import time
import pytest

pytestmark = pytest.mark.xdist_group("crashing")


def test_first():
    time.sleep(0.3)


def test_crashes():
    time.sleep(1)
    os._exit(1)


def test_after_the_crash():
    pass
"""
HANGING = """
import time
import pytest


@pytest.mark.timeout(2)
def test_hangs():
    time.sleep(60)
"""
OTHERS = """
import time
import pytest


@pytest.mark.parametrize("n", range(4))
def test_other(n):
    time.sleep(0.5)
"""


def run_suite(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.xdist_guard"]\n')
    (tmp_path / "test_crashing.py").write_text(CRASHING)
    (tmp_path / "test_hanging.py").write_text(HANGING)
    (tmp_path / "test_others.py").write_text(OTHERS)
    root = Path(__file__).resolve().parent.parent
    started = time.monotonic()
    ran = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "-o", "timeout_method=thread", "-q", "--rootdir", str(tmp_path), *extra, str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "PARLEY_TEST_STALL_SECONDS": "20"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    return ran, time.monotonic() - started


def test_xdist_worker_crash_reported_once_rest_of_group_runs_no_stall(tmp_path: Path) -> None:
    ran, took = run_suite(tmp_path)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 1, out  # failed, not stuck (3) and not passed
    assert "2 failed, 6 passed" in out, out  # each crash once; the group's other tests ran
    assert "crashed while running 'test_crashing.py::test_crashes" in out
    assert "crashed while running 'test_hanging.py::test_hangs" in out
    assert "+++ a test passed its time limit (pytest-timeout) +++" in out  # its stack, shown
    assert 'test_hanging.py", line 8 in test_hangs' in out
    assert "the run is stuck" not in out
    assert took < 60, took


def test_xdist_stalled_run_ends_with_status_3_naming_what_is_pending(tmp_path: Path) -> None:
    """A worker stuck where no per-test limit reaches (here a test without one): the
    controller ends the run once no report came for PARLEY_TEST_STALL_SECONDS."""
    (tmp_path / "test_stuck.py").write_text(
        "import time, pytest\n\n\n@pytest.mark.timeout(0)\ndef test_stuck():\n    time.sleep(40)\n"
    )
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.xdist_guard"]\n')
    root = Path(__file__).resolve().parent.parent
    started = time.monotonic()
    ran = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "PARLEY_TEST_STALL_SECONDS": "5"},
        capture_output=True,
        text=True,
        timeout=80,
    )  # fmt: skip
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "no test report for 5 s: the run is stuck." in ran.stdout
    assert "test_stuck.py::test_stuck" in ran.stdout  # what the worker still held
    assert time.monotonic() - started < 60
