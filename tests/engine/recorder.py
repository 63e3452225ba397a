"""Recording an engine's events, for tests that wait for them and check their order."""

from __future__ import annotations

import anyio

from parley.engine import AudioChunk, ConversationEngine, EngineEvent


class Recorder:
    """Consumes an engine's events in the background and waits for a given kind.

    `times` holds when each event arrived (anyio's clock), one per event.
    """

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []
        self.times: list[float] = []
        self._changed = anyio.Event()

    async def consume(self, engine: ConversationEngine) -> None:
        async for event in engine.events():
            self.events.append(event)
            self.times.append(anyio.current_time())
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(self, kind: type[EngineEvent], count: int = 1) -> None:
        with anyio.fail_after(10):
            while sum(isinstance(event, kind) for event in self.events) < count:
                await self._changed.wait()

    async def wait_for_any(self, *kinds: type[EngineEvent]) -> None:
        """Wait until an event of one of `kinds` has arrived."""
        with anyio.fail_after(10):
            while not any(isinstance(event, kinds) for event in self.events):
                await self._changed.wait()

    def sentences(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, AudioChunk) and e.text]

    def sentence_times(self) -> dict[str, float]:
        """When each sentence's first chunk arrived."""
        return {
            event.text: at
            for event, at in zip(self.events, self.times, strict=True)
            if isinstance(event, AudioChunk) and event.text
        }

    def kinds(self) -> list[type[EngineEvent]]:
        kinds: list[type[EngineEvent]] = []
        for event in self.events:
            if not (kinds and kinds[-1] is AudioChunk is type(event)):
                kinds.append(type(event))
        return kinds
