"""A clean shutdown exits 0 (issue #22 item 7): uvicorn re-raises SIGTERM after its graceful
shutdown, which killed `parley serve` with status -15, and supervisors counted a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.serve_process import ServeProcess

pytestmark = pytest.mark.e2e


def test_serve_sigterm_exits_status_0(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, PARLEY_DATABASE_URL="sqlite:///parley.db")
    try:
        serve.start()
        assert serve.terminate() < 10
        assert serve.process is not None
        assert serve.process.returncode == 0, serve.output.read_text()[-2000:]
    finally:
        serve.ensure_stopped()
