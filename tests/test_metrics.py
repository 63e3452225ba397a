"""parley.metrics: the recording functions, their registry, and the places that record."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from parley import metrics
from parley.db.database import Database
from parley.errors import Unavailable
from parley.jwt import JwksFetcher, JwksFetchError
from parley.stores.redis import RedisRevocations, connect_redis
from tests.cli.test_startup_errors import free_port

pytestmark = pytest.mark.anyio


def sample(collected: metrics.Metrics, name: str, **labels: str) -> float | None:
    value = collected.registry.get_sample_value(name, labels)
    return value


def test_metrics_record_nothing_when_inactive() -> None:
    metrics.observe_turn_latency(1.0)  # no active registry: nothing to write, no error
    metrics.count_auth_refusal("unauthorized")
    assert metrics.active() is None


def test_metrics_turn_latency_and_queue_time_histograms() -> None:
    with metrics.activate(metrics.Metrics()) as collected:
        metrics.observe_turn_latency(0.3)
        metrics.observe_turn_latency(1.2)
        metrics.observe_queue_time("tts", 0.02)
        metrics.observe_queue_time("stt", 0.2)
    assert sample(collected, "parley_turn_latency_seconds_count") == 2
    assert sample(collected, "parley_turn_latency_seconds_bucket", le="0.5") == 1
    assert sample(collected, "parley_queue_time_seconds_count", stage="tts") == 1
    assert sample(collected, "parley_queue_time_seconds_sum", stage="stt") == pytest.approx(0.2)
    assert metrics.active() is None


def test_metrics_unknown_stage_or_store_refused() -> None:
    with pytest.raises(ValueError, match="stage"):
        metrics.observe_queue_time("conv_123", 1.0)
    with pytest.raises(ValueError, match="store"):
        metrics.count_store_error("somewhere")


def test_metrics_each_app_registry_is_its_own() -> None:
    first, second = metrics.Metrics(), metrics.Metrics()
    with metrics.activate(first), metrics.activate(second):
        metrics.conversation_went_live()
    assert sample(second, "parley_live_conversations") == 1
    assert sample(first, "parley_live_conversations") == 0


async def test_metrics_jwks_fetch_failures_counted() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500)

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    fetcher = JwksFetcher(client, resolve=resolve)
    with metrics.activate(metrics.Metrics()) as collected:
        async with client:
            with pytest.raises(JwksFetchError):
                await fetcher.fetch("https://keys.example.com/jwks.json")
            with pytest.raises(JwksFetchError):
                await fetcher.fetch("http://keys.example.com/jwks.json")
    assert sample(collected, "parley_jwks_fetches_total", outcome="failed") == 2
    assert sample(collected, "parley_jwks_fetches_total", outcome="ok") == 0


async def test_metrics_database_failure_counted_as_store_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a SQLite database, only text " * 100)
    database = Database.from_url(f"sqlite+aiosqlite:///{garbage}")
    with metrics.activate(metrics.Metrics()) as collected:
        with pytest.raises(Unavailable):
            await database.ping()
        await database.dispose()
    assert sample(collected, "parley_store_errors_total", store="database") == 1


async def test_metrics_redis_failure_counted_as_store_error() -> None:
    client = connect_redis(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5)
    with metrics.activate(metrics.Metrics()) as collected:
        with pytest.raises(Unavailable):
            await RedisRevocations(client).is_revoked("key_1")
        await client.aclose()
    assert sample(collected, "parley_store_errors_total", store="redis") == 1
