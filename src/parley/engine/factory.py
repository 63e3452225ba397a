"""The default factory: one per process, holding the plug-ins every conversation shares."""

from __future__ import annotations

from parley.clock import Clock, SystemClock
from parley.engine.base import Recognizer, ReplyGenerator, SessionConfig, Synthesizer
from parley.engine.default import DefaultEngine, EngineSettings
from parley.engine.recognizer import PlaceholderRecognizer
from parley.engine.reply import RuleBasedReplies
from parley.engine.tts import load_synthesizer


class DefaultEngineFactory:
    """Holds the plug-ins for the whole process; creates one DefaultEngine per conversation."""

    def __init__(
        self,
        synthesizer: Synthesizer,
        *,
        recognizer: Recognizer | None = None,
        replies: ReplyGenerator | None = None,
        settings: EngineSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.synthesizer = synthesizer
        self.recognizer: Recognizer = recognizer or PlaceholderRecognizer()
        self.replies: ReplyGenerator = replies or RuleBasedReplies()
        self.settings = settings or EngineSettings()
        self.clock: Clock = clock or SystemClock()

    async def warm_up(self) -> None:
        """Load the synthesizer's default voice."""
        await self.synthesizer.warm_up()

    def create(self, config: SessionConfig) -> DefaultEngine:
        """Return an engine for one conversation; enter it with `async with`."""
        return DefaultEngine(
            config,
            synthesizer=self.synthesizer,
            recognizer=self.recognizer,
            replies=self.replies,
            settings=self.settings,
            clock=self.clock,
        )


def load_engine_factory(settings: EngineSettings | None = None) -> DefaultEngineFactory:
    """Build the production factory: hibari-tts (or espeak-ng), placeholder recognizer, rules."""
    return DefaultEngineFactory(load_synthesizer(), settings=settings)
