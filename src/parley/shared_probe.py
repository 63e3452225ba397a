"""A readiness probe whose concurrent callers share one run (`GET /health`).

A burst of health checks costs one query to each dependency. An earlier answer is never
reused: a dependency that hung a moment ago must be reported at once
(`test_postgres_hung_answers_503_within_bound_then_recovers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class SharedProbe:
    """Runs `probe` for its callers: those who ask while it runs await that same run."""

    def __init__(self, probe: Callable[[], Awaitable[None]]) -> None:
        self._probe = probe
        self._running: asyncio.Future[None] | None = None

    async def __call__(self) -> None:
        """Return when the probe passes; raise what it raised."""
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._probe())
        # shield: a cancelled caller must not cancel the run the others are waiting for.
        await asyncio.shield(self._running)
