"""Parley's conversation engine: speech in, events and speech out, with no network types.

Build one factory per process from EngineOptions (`build_engine_factory(options)`, or
DefaultEngineFactory with your own plug-ins), warm it up, then one engine per conversation:

    async with factory.create(config) as engine:
        ...  # feed_audio / say / generate_reply ...; relay `async for event in engine.events()`

Plug-ins live one kind per package: recognizers, replies, synthesizers, vad; sentences.py
cuts reply text. See docs/engine.md for the pipeline, the settings and the plug-ins.
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
    ToolCallInterrupted,
    ToolCallPart,
    Transcript,
    Turn,
    UserFinishedSpeaking,
    UserStartedSpeaking,
    Utterance,
)
from parley.engine.default import APOLOGY, DefaultEngine, EngineSettings
from parley.engine.errors import (
    AudioChunkMisaligned,
    AudioChunkTooLong,
    EngineClosed,
    InvalidAudioChunk,
    RecognizerOverloaded,
    RecognizerUnavailable,
    ReplyModelFailed,
    SynthesizerUnavailable,
    TooManyPendingResponses,
    TurnModelUnavailable,
    UnknownAudioFormat,
)
from parley.engine.factory import DefaultEngineFactory, build_engine_factory
from parley.engine.options import EngineOptions, LlmOptions
from parley.engine.recognizers import PlaceholderRecognizer, WhisperRecognizer, check_model_dir
from parley.engine.replies import ChatCompletionReplies, RuleBasedReplies
from parley.engine.semantic import SemanticParams, SmartTurn, installed_turn_model
from parley.engine.synthesizers import EspeakSynthesizer, HibariSynthesizer, load_synthesizer
from parley.engine.tools import (
    ASYNC_STARTED,
    END_CONVERSATION_TOOL,
    HOLDING_LINE_AFTER_S,
    MAX_TOOL_ROUNDS,
    NoTools,
    ToolDefinition,
    ToolInvocation,
    ToolRunner,
)
from parley.engine.vad import VadParams

__all__ = [
    "APOLOGY",
    "ASYNC_STARTED",
    "END_CONVERSATION_TOOL",
    "HOLDING_LINE_AFTER_S",
    "MAX_INPUT_CHUNK_MS",
    "MAX_TOOL_ROUNDS",
    "OUTPUT_CHUNK_MS",
    "AssistantEndedConversation",
    "AssistantFinishedSpeaking",
    "AssistantStartedSpeaking",
    "AudioChunk",
    "AudioChunkMisaligned",
    "AudioChunkTooLong",
    "AudioFormat",
    "ChatCompletionReplies",
    "ConversationEngine",
    "DefaultEngine",
    "DefaultEngineFactory",
    "EndConversation",
    "EngineClosed",
    "EngineEvent",
    "EngineFactory",
    "EngineOptions",
    "EngineSettings",
    "EngineWarning",
    "EspeakSynthesizer",
    "HibariSynthesizer",
    "InputText",
    "InterruptedResponse",
    "InvalidAudioChunk",
    "LlmOptions",
    "NoTools",
    "PlaceholderRecognizer",
    "Recognizer",
    "RecognizerOverloaded",
    "RecognizerUnavailable",
    "ReplyGenerator",
    "ReplyModelFailed",
    "ReplyPart",
    "ReplyRequest",
    "RuleBasedReplies",
    "Samples",
    "SemanticParams",
    "SessionConfig",
    "SmartTurn",
    "Synthesizer",
    "SynthesizerUnavailable",
    "TooManyPendingResponses",
    "ToolCallInterrupted",
    "ToolCallPart",
    "ToolDefinition",
    "ToolInvocation",
    "ToolRunner",
    "Transcript",
    "Turn",
    "TurnModelUnavailable",
    "UnknownAudioFormat",
    "UserFinishedSpeaking",
    "UserStartedSpeaking",
    "Utterance",
    "VadParams",
    "WhisperRecognizer",
    "build_engine_factory",
    "check_model_dir",
    "installed_turn_model",
    "load_synthesizer",
]
