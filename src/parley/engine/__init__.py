"""Parley's conversation engine: speech in, events and speech out, with no network types.

Build one factory per process (`load_engine_factory()`, or DefaultEngineFactory with your own
plug-ins), then one engine per conversation:

    async with factory.create(config) as engine:
        ...  # feed_audio / say / generate_reply ...; relay `async for event in engine.events()`

See docs/engine.md for the interface, the plug-ins, the audio formats and the voices.
"""

from parley.engine.audio import MAX_INPUT_CHUNK_MS, OUTPUT_CHUNK_MS, AudioFormat, Samples
from parley.engine.base import (
    AssistantEndedConversation,
    AssistantFinishedSpeaking,
    AssistantStartedSpeaking,
    AudioChunk,
    ConversationEngine,
    EndConversation,
    EngineEvent,
    EngineFactory,
    EngineWarning,
    InputText,
    InterruptedResponse,
    Recognizer,
    ReplyGenerator,
    ReplyPart,
    ReplyRequest,
    SessionConfig,
    Synthesizer,
    Transcript,
    Turn,
    UserFinishedSpeaking,
    UserStartedSpeaking,
)
from parley.engine.default import DefaultEngine, EngineSettings
from parley.engine.errors import (
    AudioChunkMisaligned,
    AudioChunkTooLong,
    EngineClosed,
    InvalidAudioChunk,
    SynthesizerUnavailable,
    TooManyPendingResponses,
    UnknownAudioFormat,
)
from parley.engine.factory import DefaultEngineFactory, load_engine_factory
from parley.engine.recognizer import PlaceholderRecognizer
from parley.engine.reply import RuleBasedReplies
from parley.engine.tts import EspeakSynthesizer, HibariSynthesizer, load_synthesizer
from parley.engine.vad import Utterance, VadParams

__all__ = [
    "MAX_INPUT_CHUNK_MS",
    "OUTPUT_CHUNK_MS",
    "AssistantEndedConversation",
    "AssistantFinishedSpeaking",
    "AssistantStartedSpeaking",
    "AudioChunk",
    "AudioChunkMisaligned",
    "AudioChunkTooLong",
    "AudioFormat",
    "ConversationEngine",
    "DefaultEngine",
    "DefaultEngineFactory",
    "EndConversation",
    "EngineClosed",
    "EngineEvent",
    "EngineFactory",
    "EngineSettings",
    "EngineWarning",
    "EspeakSynthesizer",
    "HibariSynthesizer",
    "InputText",
    "InterruptedResponse",
    "InvalidAudioChunk",
    "PlaceholderRecognizer",
    "Recognizer",
    "ReplyGenerator",
    "ReplyPart",
    "ReplyRequest",
    "RuleBasedReplies",
    "Samples",
    "SessionConfig",
    "Synthesizer",
    "SynthesizerUnavailable",
    "TooManyPendingResponses",
    "Transcript",
    "Turn",
    "UnknownAudioFormat",
    "UserFinishedSpeaking",
    "UserStartedSpeaking",
    "Utterance",
    "VadParams",
    "load_engine_factory",
    "load_synthesizer",
]
