"""The suite's split over processes (docs/testing.md): a module's tests that share a
module-scoped fixture run on one pytest-xdist worker, so its server is started once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULE = """
import os
import pytest


@pytest.fixture(scope="module")
def server():
    return os.environ["PYTEST_XDIST_WORKER"]


@pytest.mark.parametrize("n", range(8))
def test_shares(server, n, tmp_path_factory):
    with open(os.environ["SEEN"], "a") as seen:
        seen.write(f"shared {server} {os.environ['PYTEST_XDIST_WORKER']}\\n")


@pytest.mark.parametrize("n", range(8))
def test_alone(n):
    with open(os.environ["SEEN"], "a") as seen:
        seen.write(f"alone {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def test_xdist_module_fixture_tests_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_module.py").write_text(MODULE)
    seen = tmp_path / "seen.txt"
    root = Path(__file__).resolve().parent.parent
    ran = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(root), "SEEN": str(seen), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = seen.read_text().splitlines()
    shared = [line.split()[1:] for line in lines if line.startswith("shared")]
    assert len(shared) == 8
    assert len({worker for _, worker in shared}) == 1, shared  # one worker ran them all
    assert all(fixture == worker for fixture, worker in shared)
    assert sum(line.startswith("alone") for line in lines) == 8  # the others ran too
