"""`parley serve --workers 2` with PARLEY_METRICS=true: every scrape of /metrics, whichever
worker answers it, reports the whole instance (prometheus-client's multiprocess mode in a
temporary directory that `parley serve` removes at exit). PostgreSQL and Redis, as workers
above 1 require."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.databases import postgres_admin_url, postgres_database
from tests.faults.pg_cluster import free_port

REQUESTS = 40
UNMATCHED = re.compile(
    r'^parley_http_requests_total\{method="GET",route="unmatched",status="404"\} (\S+)$',
    re.MULTILINE,
)


@pytest.fixture
def database() -> Iterator[str]:
    if postgres_admin_url() is None:
        pytest.fail("this test needs the PostgreSQL named by PARLEY_TEST_DATABASE_URL")
    yield from postgres_database()


def fresh_get(url: str) -> httpx.Response:
    """One request on a new connection, so the kernel may hand it to either worker."""
    with httpx.Client(timeout=5) as client:
        return client.get(url)


def wait_for_health(base: str, process: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"parley serve exited:\n{log.read_text()[-3000:]}")
        try:
            if fresh_get(f"{base}/health").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"parley serve did not answer:\n{log.read_text()[-3000:]}")


@pytest.mark.timeout(240)
def test_metrics_with_two_workers_report_the_whole_instance(tmp_path: Path, database: str) -> None:
    redis_url = os.environ.get("PARLEY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/15"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        PARLEY_DATABASE_URL=database, PARLEY_REDIS_URL=redis_url, PARLEY_METRICS="true",
        PARLEY_STT="none", PARLEY_LOG_LEVEL="warning", TMPDIR=str(temporary),
    )  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [sys.executable, "-m", "parley", "serve", "--port", str(port), "--workers", "2"],
            cwd=tmp_path,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        wait_for_health(base, process, log)
        assert list(temporary.glob("parley-metrics-*")), "the shared directory is made"
        for _ in range(REQUESTS):
            assert fresh_get(f"{base}/no-such-path").status_code == 404
        counts = []
        for _ in range(6):
            found = UNMATCHED.search(fresh_get(f"{base}/metrics").text)
            counts.append(float(found.group(1)) if found else 0.0)
        assert counts == [float(REQUESTS)] * 6, counts
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    assert list(temporary.glob("parley-metrics-*")) == [], "the shared directory is removed"
