"""The soak of issue #9, shortened for CI: `bench/soak.py` for 20 s of mixed REST and
WebSocket load with abrupt drops, then SIGTERM. The 10-minute run and its RSS figures are
in docs/reliability.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


@pytest.mark.timeout(240)
def test_soak_no_conversation_left_live_no_5xx_sigterm_within_5s_with_1001(
    tmp_path: Path,
) -> None:
    out = tmp_path / "soak.json"
    run = subprocess.run(  # noqa: S603 - this interpreter, the repository's own script
        [sys.executable, str(SOAK), "--duration", "20", "--sockets", "4", "--rest", "2",
         "--json", str(out)],
        capture_output=True, text=True, timeout=220, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert sum(report["conversations"].values()) >= 20, report
    assert report["server_errors"] == 0, report
    assert report["client_error_count"] == 0, report["client_errors"]
    assert report["tracebacks_in_log"] == 0, report
    assert report["live_left"] == 0, report
    assert report["sigterm_exit_s"] < 5, report
    assert report["sigterm_close_codes"] == [1001] * 4, report
    assert report["sigterm_statuses"] == ["ended"] * 4, report
