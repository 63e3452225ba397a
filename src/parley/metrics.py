"""Prometheus metrics (`GET /metrics` when PARLEY_METRICS=true): what an operator watches.

A leaf module: it imports nothing of Parley, and prometheus-client only when metrics are on,
so any layer may record (the engine, the live session, the JWT kernel) without depending on
the HTTP layer. Series, all prefixed `parley_`:

| series | type | labels |
|---|---|---|
| `http_requests_total` | counter | `method`, `route` (template, or `unmatched`), `status` |
| `http_request_duration_seconds` | histogram | `method`, `route` |
| `auth_refusals_total` | counter | `code` (an error code such as `jti_replayed`) |
| `live_conversations` | gauge | (conversations live on this instance) |
| `turn_latency_seconds` | histogram | (end of the user's speech to the first audio of the reply) |
| `turn_stage_seconds` | histogram | `stage` (each of `TURN_STAGES`: a reply's stages, API.md 18) |
| `queue_time_seconds` | histogram | `stage` (`stt` or `tts`) |
| `jwks_fetches_total` | counter | `outcome` (`ok` or `failed`) |
| `store_errors_total` | counter | `store` (`database` or `redis`) |
| `redis_data_losses_total` | counter | (times this instance found Redis had lost its data) |

Labels hold only templates, fixed words and error codes: never a path as requested, a
credential, an organization, a conversation ID or anything else a caller chooses.

The registry belongs to one application: `create_app` builds a `Metrics` and its lifespan
`activate`s it, so the recording functions below write to the app that is serving. A
process serves one app (uvicorn workers are processes), so "the active app" is well
defined; tests that run several apps get a registry each, and the last one started
records. With metrics off, or outside any app, the functions do nothing.

Several workers (`parley serve --workers N`): each is a process with its own values, so a
scrape answered by one worker would show that worker only. `parley serve` then sets
PROMETHEUS_MULTIPROC_DIR to a fresh temporary directory (removed at exit) before the
workers start: prometheus-client's multiprocess mode keeps every worker's values in files
there, and a scrape, whichever worker answers it, sums them (`live_conversations` over the
live workers). The directory must be fresh: files of an earlier run would be counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

LATENCY_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
QUEUE_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
STAGE_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0, 1.5, 2.0, 5.0)
QUEUE_STAGES: Final = frozenset({"stt", "tts"})
TURN_STAGES: Final = (
    "endpointing",
    "transcription",
    "model_first_token",
    "speech_first_audio",
    "total",
    "played",
)
"""A reply's stages (API.md section 18): each has its own histogram series."""
STORES: Final = frozenset({"database", "redis"})
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
MULTIPROCESS_VARIABLE: Final = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's own switch to multiprocess mode (set by `parley serve --workers N`)."""


class Metrics:
    """The collectors of one application, in a registry of its own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = Counter(
            "parley_http_requests", "HTTP requests and WebSocket handshakes answered.",
            ["method", "route", "status"], registry=registry,
        )  # fmt: skip
        self.request_duration = Histogram(
            "parley_http_request_duration_seconds", "Time to answer an HTTP request.",
            ["method", "route"], registry=registry,
        )  # fmt: skip
        self.auth_refusals = Counter(
            "parley_auth_refusals", "Credentials refused, by error code.", ["code"],
            registry=registry,
        )  # fmt: skip
        self.live_conversations = Gauge(
            "parley_live_conversations", "Conversations live on this instance.",
            registry=registry, multiprocess_mode="livesum",  # the sum over live workers
        )  # fmt: skip
        self.turn_latency = Histogram(
            "parley_turn_latency_seconds",
            "From the end of the user's speech to the first audio of the reply.",
            buckets=LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.turn_stage = Histogram(
            "parley_turn_stage_seconds",
            "A stage of a reply to a spoken user turn (API.md section 18).", ["stage"],
            buckets=STAGE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.queue_time = Histogram(
            "parley_queue_time_seconds", "Time a speech job waited before it ran.", ["stage"],
            buckets=QUEUE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.jwks_fetches = Counter(
            "parley_jwks_fetches", "JWKS fetches, by outcome.", ["outcome"], registry=registry
        )
        self.store_errors = Counter(
            "parley_store_errors", "Database or Redis failures turned into 503.", ["store"],
            registry=registry,
        )  # fmt: skip
        self.redis_data_losses = Counter(
            "parley_redis_data_losses",
            "Times this instance found that Redis had lost its data (docs/reliability.md).",
            registry=registry,
        )
        for stage in sorted(QUEUE_STAGES):
            self.queue_time.labels(stage=stage)
        for stage in TURN_STAGES:
            self.turn_stage.labels(stage=stage)
        for outcome in ("ok", "failed"):
            self.jwks_fetches.labels(outcome=outcome)
        for store in sorted(STORES):
            self.store_errors.labels(store=store)

    def render(self) -> bytes:
        """Return the registry in the Prometheus text format; in multiprocess mode, the sum
        of every worker's values (read from the shared directory at each scrape)."""
        from prometheus_client import CollectorRegistry, generate_latest

        directory = os.environ.get(MULTIPROCESS_VARIABLE)
        if not directory:
            return generate_latest(self.registry)
        from prometheus_client.multiprocess import MultiProcessCollector

        combined = CollectorRegistry()
        MultiProcessCollector(combined, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(combined)


_active: list[Metrics] = []


@contextmanager
def activate(metrics: Metrics) -> Iterator[Metrics]:
    """Make `metrics` the one the recording functions write to, for the block's duration."""
    _active.append(metrics)
    try:
        yield metrics
    finally:
        _active.remove(metrics)


def active() -> Metrics | None:
    """Return the metrics of the serving application, or None when metrics are off."""
    return _active[-1] if _active else None


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    """Count one answered request under its route template (never the raw path)."""
    if (metrics := active()) is not None:
        metrics.requests.labels(method=method, route=route, status=str(status)).inc()
        metrics.request_duration.labels(method=method, route=route).observe(seconds)


def count_auth_refusal(code: str) -> None:
    """Count a refused credential by its error code (`unauthorized`, `jti_replayed`, …)."""
    if (metrics := active()) is not None:
        metrics.auth_refusals.labels(code=code).inc()


def conversation_went_live() -> None:
    """A conversation went live on this instance."""
    if (metrics := active()) is not None:
        metrics.live_conversations.inc()


def conversation_ended() -> None:
    """A conversation that went live on this instance has ended."""
    if (metrics := active()) is not None:
        metrics.live_conversations.dec()


def observe_turn_latency(seconds: float) -> None:
    """Record the time from the end of a user's speech to the first audio of the reply."""
    if (metrics := active()) is not None:
        metrics.turn_latency.observe(seconds)


def observe_turn_stage(stage: str, seconds: float) -> None:
    """Record one stage of a reply (`TURN_STAGES`), once per reply."""
    if stage not in TURN_STAGES:
        raise ValueError(f"stage must be one of {list(TURN_STAGES)}")
    if (metrics := active()) is not None:
        metrics.turn_stage.labels(stage=stage).observe(seconds)


def observe_queue_time(stage: str, seconds: float) -> None:
    """Record how long a speech job waited: `stage` is `stt` or `tts`."""
    if stage not in QUEUE_STAGES:
        raise ValueError(f"stage must be one of {sorted(QUEUE_STAGES)}")
    if (metrics := active()) is not None:
        metrics.queue_time.labels(stage=stage).observe(seconds)


def count_jwks_fetch(*, ok: bool) -> None:
    """Count one JWKS fetch and whether it succeeded."""
    if (metrics := active()) is not None:
        metrics.jwks_fetches.labels(outcome="ok" if ok else "failed").inc()


def count_store_error(store: str) -> None:
    """Count a failure of the database or Redis that the service answered with 503."""
    if store not in STORES:
        raise ValueError(f"store must be one of {sorted(STORES)}")
    if (metrics := active()) is not None:
        metrics.store_errors.labels(store=store).inc()


def count_redis_data_loss() -> None:
    """Count one loss of Redis's data, as this instance noticed it."""
    if (metrics := active()) is not None:
        metrics.redis_data_losses.inc()
