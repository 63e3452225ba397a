"""The default factory: one per process, holding the plug-ins every conversation shares."""

from __future__ import annotations

from parley.clock import Clock, SystemClock
from parley.engine.audio import wav
from parley.engine.base import Recognizer, ReplyGenerator, SessionConfig, Synthesizer
from parley.engine.default import DefaultEngine, EngineSettings
from parley.engine.options import EngineOptions
from parley.engine.recognizers import PlaceholderRecognizer, WhisperRecognizer
from parley.engine.replies import ChatCompletionReplies, RuleBasedReplies
from parley.engine.semantic import SmartTurn
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
        turn_model: SmartTurn | None = None,
    ) -> None:
        self.synthesizer = synthesizer
        self.turn_model = turn_model  # None: the turn ends on silence alone (vad mode)
        self.recognizer: Recognizer = recognizer or PlaceholderRecognizer()
        self.replies: ReplyGenerator = replies or RuleBasedReplies()
        self.settings = settings or EngineSettings()
        self.clock: Clock = clock or SystemClock()
        self.vad_pool = shared_pool()

    async def warm_up(self) -> None:
        """Load the voice, the speech model, a few VAD models and the end-of-turn model."""
        await self.synthesizer.warm_up()
        await self.recognizer.warm_up()
        await self.vad_pool.warm_up()
        if self.turn_model is not None:
            await self.turn_model.warm_up()

    async def aclose(self) -> None:
        """Release the recognizer's and the turn model's threads, and the replier's client."""
        await self.recognizer.aclose()
        await self.replies.aclose()
        if self.turn_model is not None:
            await self.turn_model.aclose()

    async def speak_wav(self, text: str, *, voice_id: str, sample_rate: int) -> bytes:
        """`text` spoken in `voice_id` (the default voice if unknown), a WAV file at
        `sample_rate`."""
        voice = self.synthesizer.resolve_voice(voice_id) or self.synthesizer.default_voice
        samples = await self.synthesizer.synthesize(text, voice=voice)
        return wav(samples, self.synthesizer.sample_rate, sample_rate)

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
            turn_model=self.turn_model,
        )


def build_engine_factory(
    options: EngineOptions, *, clock: Clock | None = None
) -> DefaultEngineFactory:
    """Build the factory the options ask for.

    Raises RecognizerUnavailable for a bad speech model, TurnModelUnavailable when semantic
    turn detection is asked for and the end-of-turn model is not installed.
    """
    recognizer: Recognizer
    if options.stt == "none":
        recognizer = PlaceholderRecognizer()
    else:
        recognizer = WhisperRecognizer(
            options.stt_model,
            threads=options.stt_threads,
            beam_size=options.stt_beam_size,
            max_pending=options.stt_max_pending,
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
        turn_model=SmartTurn(options.turn_model) if options.turn_detection == "semantic" else None,
    )
