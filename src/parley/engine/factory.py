"""The default factory: one per process, holding the plug-ins every conversation shares."""

from __future__ import annotations

from parley.clock import Clock, SystemClock
from parley.engine.base import Recognizer, ReplyGenerator, SessionConfig, Synthesizer
from parley.engine.default import DefaultEngine, EngineSettings
from parley.engine.options import EngineOptions
from parley.engine.recognizers import PlaceholderRecognizer, WhisperRecognizer
from parley.engine.replies import ChatCompletionReplies, RuleBasedReplies
from parley.engine.synthesizers import load_synthesizer
from parley.engine.tools import NoTools, ToolRunner
from parley.engine.vad import shared_pool


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
        self.vad_pool = shared_pool()

    async def warm_up(self) -> None:
        """Load the voice, the speech model and a few VAD models."""
        await self.synthesizer.warm_up()
        await self.recognizer.warm_up()
        await self.vad_pool.warm_up()

    async def aclose(self) -> None:
        """Release the recognizer's worker and the replier's HTTP client."""
        await self.recognizer.aclose()
        await self.replies.aclose()

    def create(
        self, config: SessionConfig, *, tool_runner: ToolRunner | None = None
    ) -> DefaultEngine:
        """Return an engine for one conversation; enter it with `async with`."""
        return DefaultEngine(
            config,
            tool_runner=tool_runner or NoTools(),
            synthesizer=self.synthesizer,
            recognizer=self.recognizer,
            replies=self.replies,
            vad_pool=self.vad_pool,
            settings=self.settings,
            clock=self.clock,
        )


def build_engine_factory(
    options: EngineOptions, *, clock: Clock | None = None
) -> DefaultEngineFactory:
    """Build the factory the options ask for (raises RecognizerUnavailable for a bad model)."""
    recognizer: Recognizer
    if options.stt == "none":
        recognizer = PlaceholderRecognizer()
    else:
        recognizer = WhisperRecognizer(
            options.stt_model, threads=options.stt_threads, max_pending=options.stt_max_pending
        )
    replies: ReplyGenerator
    if options.llm is None:
        replies = RuleBasedReplies()
    else:
        llm = options.llm
        replies = ChatCompletionReplies(
            base_url=llm.base_url,
            api_key=llm.api_key,
            model=llm.model,
            timeout_s=llm.timeout_s,
            first_token_timeout_s=llm.timeout_s,
            max_history=llm.max_history,
        )
    return DefaultEngineFactory(
        load_synthesizer(),
        recognizer=recognizer,
        replies=replies,
        settings=options.tuning,
        clock=clock,
    )
