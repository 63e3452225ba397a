"""Every instance notices when Redis loses its data (issue #22 item 6).

Two real `parley serve` processes share one PostgreSQL database and a Redis of the test's
own, without persistence. Redis restarts (every key gone). Rate-limit counts and the
sign-in throttle start over, which no request reveals, so each instance must find the loss
by itself: each logs it exactly once, and each one's `/metrics` counts it once, although
only one of them writes the data-loss marker again.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.databases import postgres_admin_url, postgres_database
from tests.faults.redis_server import RedisServer
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

LOSS_LINE = "Redis lost its data"
COUNTER = re.compile(r"^parley_redis_data_losses_total (\S+)$", re.MULTILINE)
NOTICE_SECONDS = 10.0


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[RedisServer, list[ServeProcess]]]:
    if postgres_admin_url() is None:
        pytest.fail("PARLEY_TEST_DATABASE_URL is not set: this test needs PostgreSQL.")
    redis_server = RedisServer()
    with contextlib.ExitStack() as stack:
        stack.callback(redis_server.destroy)
        redis_server.start()
        database_url = stack.enter_context(contextlib.contextmanager(postgres_database)())
        shared = {
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_REDIS_URL": redis_server.url,
            "PARLEY_METRICS": "true",
        }
        instances = [ServeProcess(tmp_path, PARLEY_INSTANCE_ID=f"loss-{name}") for name in "ab"]
        for instance in instances:
            instance.env.update(shared)
            stack.callback(instance.ensure_stopped)
            instance.start()
        yield redis_server, instances


def losses_counted(instance: ServeProcess) -> float:
    found = COUNTER.search(httpx.get(f"{instance.http}/metrics", timeout=5).text)
    assert found is not None, "no parley_redis_data_losses_total series"
    return float(found.group(1))


def test_redis_restarted_empty_every_instance_logs_once_and_counts(
    fleet: tuple[RedisServer, list[ServeProcess]],
) -> None:
    redis_server, instances = fleet
    assert [losses_counted(i) for i in instances] == [0.0, 0.0]
    redis_server.stop()
    redis_server.start()  # no persistence: every key is gone
    deadline = time.monotonic() + NOTICE_SECONDS
    while time.monotonic() < deadline:  # bounded
        if all(LOSS_LINE in i.output.read_text() for i in instances):
            break
        time.sleep(0.2)
    time.sleep(3)  # a few more checks of the data set: none may log the same loss again
    for instance in instances:
        lines = [line for line in instance.output.read_text().splitlines() if LOSS_LINE in line]
        assert len(lines) == 1, (instance.port, lines)
        assert lines[0].startswith("WARNING ")
        assert losses_counted(instance) == 1.0
