"""The engine's interface: session settings, events, and the plug-in points.

A process builds one EngineFactory (which holds the heavy models) and asks it for one
ConversationEngine per conversation. The socket layer feeds the engine client input and relays
its events; it knows nothing about speech. The default engine composes three small plug-ins,
each replaceable on its own: a Recognizer (speech to text), a ReplyGenerator (what to answer)
and a Synthesizer (text to speech).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol, Self, TypeAlias

from parley.engine.audio import AudioFormat, Samples
from parley.engine.timing import TurnMarks
from parley.engine.tools import ToolDefinition, ToolRunner


@dataclass(frozen=True)
class AgentTuning:
    """How one conversation's agent greets, speaks and listens (API.md section 17; the
    defaults: the server's). engine/tuning.py applies it."""

    generate_welcome: bool = False
    """The model writes the welcome: its first reply (`tuning.WELCOME_INSTRUCTION`)."""
    welcome_interruptible: bool = True
    """False: the user's speech (or `interrupt`) during the welcome does not cut it."""
    speed: float = 1.0
    """The synthesizer's pace: 2.0 speaks a sentence in about half the time."""
    timezone: str | None = None
    """An IANA zone: each reply's system prompt ends with the local time there."""
    pronunciations: tuple[tuple[str, str], ...] = ()
    """(word, pronunciation): the synthesizer gets the pronunciation; the words sent stay."""
    vad_threshold: float | None = None
    """The speech probability at which the user starts speaking."""
    end_silence_ms: int | None = None
    """The silence that ends the user's turn."""


@dataclass(frozen=True)
class LanguageSettings:
    """An agent's languages beyond its default (`SessionConfig.language`): API.md section 18,
    engine/languages.py."""

    additional: tuple[str, ...] = ()
    mode: str = "auto"
    """`auto`, `initial` or `request` (engine/languages.py)."""
    voices: tuple[tuple[str, str], ...] = ()
    """(language, voice ID) for each language that speaks with a voice of its own."""


@dataclass(frozen=True)
class SessionConfig:
    """What one conversation needs from its agent and the client's `config` message."""

    agent_name: str
    system_prompt: str
    welcome_message: str | None
    voice_id: str
    input_format: AudioFormat
    output_format: AudioFormat
    language: str = "en"
    tools: tuple[ToolDefinition, ...] = ()
    """The tools the model may call (section 12); the built-in ending tool included if listed."""
    keywords: tuple[str, ...] = ()
    """Words the recognizer should expect: the agent's `boosted_keywords` (API.md 4)."""
    history: tuple[Turn, ...] = ()
    """The conversation so far, when it goes on in a new engine (a caller back from a
    transfer that was not answered)."""
    hold_welcome: bool = False
    """Hold the welcome until the user's first turn ends or `release_welcome` (a call
    placed to someone: the callee speaks first, API.md section 15)."""
    word_timings: bool = False
    """Each InputText carries its words' times in the input stream (`InputText.words`):
    redaction tones them out of the recording (API.md section 16). It costs the final
    decode an alignment pass (docs/performance.md)."""
    tuning: AgentTuning = AgentTuning()
    """The agent's welcome, pace, pronunciations, local time and turn settings."""
    languages: LanguageSettings = LanguageSettings()
    """The languages besides `language`, how the reply's is chosen, a voice for each."""
    paced: bool = True
    """Send the agent's audio at most the engine's lead ahead of playback (a person listens).
    False: as fast as it is made, for a listener that does not play it (a test run's
    scripted caller, API.md section 19: the run waits on the agent's thinking, not on its
    speaking time)."""


@dataclass(frozen=True)
class Word:
    """A recognized word and when it was said, in seconds (of the utterance's audio in a
    Transcript, of the input stream in an InputText); `parley.redaction.TimedWord`."""

    text: str
    start: float
    end: float


# --- events (engine -> socket layer), in the order API.md section 8 lists them -----------


@dataclass(frozen=True)
class InputText:
    """The user's words for one utterance ("[speech 1.2 s]" with PARLEY_STT=none).

    With `SessionConfig.word_timings`, `words` are its words, each with where it was said in
    the input stream: seconds from the first sample the engine was fed, muted audio counted.
    """

    text: str
    language: str
    words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class AudioChunk:
    """Assistant audio in the session's output format.

    `text` is the sentence this chunk begins, on the first chunk of each sentence, else "".
    `turn`, on the first chunk of a reply to a spoken user turn, holds when its stages
    happened (engine/timing.py); `timings` is what the socket layer measured of them as it
    sent the chunk (API.md section 18: the stages in milliseconds), which the wire carries.
    """

    audio: bytes
    text: str
    turn: TurnMarks | None = None
    timings: Mapping[str, float] | None = None


@dataclass(frozen=True)
class UserStartedSpeaking:
    pass


@dataclass(frozen=True)
class UserFinishedSpeaking:
    pass


@dataclass(frozen=True)
class InputCancelled:
    """The user's speech started (UserStartedSpeaking) but no words came of it: too little
    speech for a turn (a cough, a click), or speech the recognizer heard no word in."""


@dataclass(frozen=True)
class AssistantStartedSpeaking:
    pass


@dataclass(frozen=True)
class AssistantFinishedSpeaking:
    """The response was sent in full and its playback time has passed."""


@dataclass(frozen=True)
class InterruptedResponse:
    """The user spoke over the assistant; `text` holds what the listener had heard of it."""

    text: str


@dataclass(frozen=True)
class AssistantEndedConversation:
    """The assistant said goodbye; the socket layer should end the conversation."""


@dataclass(frozen=True)
class AssistantHandedOff:
    """A tool call handed the conversation on (a transfer, API.md section 15), after the
    words said before it; the socket layer carries it out (the runner kept what it needs)."""


@dataclass(frozen=True)
class KeypadPressed:
    """The assistant pressed phone keys (`keypad_input`), after what it said before them.

    A phone call's codec plays them into the call as DTMF tones (engine/dtmf.py); the
    socket sends a `dtmf` frame. The response's playback time includes the tones.
    """

    digits: str


@dataclass(frozen=True)
class AssistantChoseNotToRespond:
    """The model chose to stay silent for this turn (`choose_not_to_respond`)."""


@dataclass(frozen=True)
class ToolCallInterrupted:
    """The user spoke while a reply waited for this sync call: the reply was dropped.

    The call itself is not cancelled (its effect may have happened); its output still joins
    the history when it arrives.
    """

    call_id: str
    tool_name: str


@dataclass(frozen=True)
class EngineWarning:
    """Something degraded but the conversation goes on (e.g. an unknown voice)."""

    code: str
    message: str


EngineEvent: TypeAlias = (
    InputText
    | AudioChunk
    | UserStartedSpeaking
    | UserFinishedSpeaking
    | InputCancelled
    | AssistantStartedSpeaking
    | AssistantFinishedSpeaking
    | InterruptedResponse
    | AssistantEndedConversation
    | AssistantHandedOff
    | KeypadPressed
    | AssistantChoseNotToRespond
    | ToolCallInterrupted
    | EngineWarning
)


# --- plug-in interfaces --------------------------------------------------------------------


@dataclass(frozen=True)
class Utterance:
    """The audio of one user turn (or of its beginning) at the recognizer's rate."""

    samples: Samples
    sample_rate: int
    speech_seconds: float


@dataclass(frozen=True)
class Transcript:
    """A recognizer's result; `placeholder` is True when no words were recognized.

    `queue_seconds` is the time the decode waited for the recognizer, `compute_seconds`
    the time it ran. `words`, when asked for, are the words of `text` (split at spaces),
    each with its time in the utterance's audio; empty when the recognizer cannot tell.
    """

    text: str
    language: str
    placeholder: bool = False
    queue_seconds: float = 0.0
    compute_seconds: float = 0.0
    words: tuple[Word, ...] = ()


class Recognizer(Protocol):
    """Speech to text. Built once per process; must be safe to share."""

    @property
    def sample_rate(self) -> int:
        """The rate the engine gives utterances at."""
        ...

    @property
    def incremental(self) -> bool:
        """True when partial decodes (while the user speaks) help the final one."""
        ...

    async def warm_up(self) -> None:
        """Load the model now rather than on the first utterance."""
        ...

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
        words: bool = False,
        languages: Sequence[str] = (),
    ) -> Transcript | None:
        """Return the words of an utterance, starting with `prefix` when one is given.

        `prompt` names words to expect (the agent's keywords); a recognizer may ignore it.
        `words` (finals only) asks for `Transcript.words`, the times of the words.
        `languages` (finals only; given only to a multilingual agent's recognizer,
        engine/languages.py): decode in the one of them the speech is likeliest in, and
        report it as `Transcript.language`; a recognizer that cannot tell uses `language`.
        A partial decode is optional work: return None to skip it (e.g. when busy).
        Run heavy work off the event loop.
        """
        ...

    async def aclose(self) -> None:
        """Release what the recognizer holds (threads, model)."""
        ...


@dataclass(frozen=True)
class ToolCallPart:
    """A tool call the model made, assembled from its stream; `arguments` is the raw JSON.

    Yielded by a reply generator after the text the model said before the call; the engine
    parses and checks the arguments (a model may send broken JSON or invent parameters).
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Turn:
    """One entry of the conversation history.

    An `assistant` turn may carry the tool calls it made (its text: what the model said
    before them); each call is followed by one `tool` turn whose text is the JSON of the
    call's output and whose `tool_call_id` names the call. A `system` turn is a note the
    client added to the history (`add_system_message`).
    """

    role: Literal["user", "assistant", "tool", "system"]
    text: str
    tool_calls: tuple[ToolCallPart, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ReplyRequest:
    """Everything a reply generator may use for one reply.

    `user_message` is the text to answer (None: speak without one, e.g. to re-engage);
    `transcribed` is False when it is only a placeholder for speech nobody could transcribe;
    `system_message` is an extra instruction for this reply only; `tools` are the tools
    the model may call in this reply (none: it may only speak).
    """

    agent_name: str
    system_prompt: str
    language: str
    history: tuple[Turn, ...]
    user_message: str | None = None
    system_message: str | None = None
    transcribed: bool = True
    tools: tuple[ToolDefinition, ...] = ()


@dataclass(frozen=True)
class EndConversation:
    """Yielded by a reply generator, after its text, to end the conversation."""


@dataclass(frozen=True)
class HandOver:
    """Queued to the speaker after a reply's words when a tool call handed the conversation
    on: AssistantHandedOff follows AssistantFinishedSpeaking."""


@dataclass(frozen=True)
class PressKeys:
    """In a reply stream (from the tool loop): press these keys after the text before."""

    digits: str


@dataclass(frozen=True)
class StaySilent:
    """In a reply stream (from the tool loop): the model chose not to respond."""


ReplyPart: TypeAlias = str | EndConversation | ToolCallPart | PressKeys | StaySilent | HandOver


class ReplyGenerator(Protocol):
    """What the assistant says. Built once per process; must be safe to share."""

    def greeting(self, config: SessionConfig) -> str | None:
        """Return what to say when the conversation starts, or None to wait for the user."""
        ...

    def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        """Stream the reply as text pieces (any size; the engine splits sentences).

        A model that calls tools yields one ToolCallPart per call after its text; the
        engine runs them and asks again with the outputs in the history.
        """
        ...

    async def aclose(self) -> None:
        """Release what the generator holds (an HTTP client)."""
        ...


class Synthesizer(Protocol):
    """Text to speech. Built once per process; must be safe to share between conversations."""

    @property
    def sample_rate(self) -> int:
        """The rate of the samples synthesize returns."""
        ...

    @property
    def default_voice(self) -> str:
        """The voice used when a session's voice_id is unknown."""
        ...

    def voices(self) -> tuple[str, ...]:
        """Return the voice names usable on this server."""
        ...

    def resolve_voice(self, voice_id: str) -> str | None:
        """Return the voice name for an agent's voice_id ("" = default), None if unusable."""
        ...

    async def warm_up(self) -> None:
        """Load the default voice now rather than on the first sentence."""
        ...

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        """Return the speech for one sentence at `speed` (1.0: the voice's own pace, 0.5 to
        2.0); never block the event loop."""
        ...


# --- the engine ----------------------------------------------------------------------------


class ConversationEngine(Protocol):
    """One conversation's speech engine; use it as an async context manager.

    Entering starts it (and queues the greeting); leaving, or close(), stops it and ends the
    events() stream. events() must be consumed concurrently with the input calls: the event
    buffer is bounded, and a full buffer makes the input calls wait.
    Input methods raise EngineClosed after close(); feed_audio raises InvalidAudioChunk.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def events(self) -> AsyncIterator[EngineEvent]:
        """Return the single stream of events; it ends when the engine closes."""
        ...

    async def feed_audio(self, audio: bytes) -> None:
        """Take one chunk (at most 40 ms) of user audio in the session's input format."""
        ...

    async def say(self, text: str, *, then_end: bool = False) -> None:
        """Speak exactly `text`, after anything already queued; with `then_end`, end the
        conversation once it is said (AssistantEndedConversation)."""
        ...

    async def release_welcome(self, *, speak: bool = True) -> None:
        """Speak the welcome held by `SessionConfig.hold_welcome` now, or drop it."""
        ...

    async def generate_reply(
        self, *, user_message: str | None = None, system_message: str | None = None
    ) -> None:
        """Queue a reply from the reply generator, optionally to `user_message`."""
        ...

    async def update_system_prompt(self, text: str) -> None:
        """Use `text` as the system prompt for every later reply."""
        ...

    async def add_system_message(self, text: str) -> None:
        """Add `text` to the history as a system message, where it stands now; no reply."""
        ...

    async def update_tools(self, tools: tuple[ToolDefinition, ...]) -> None:
        """Offer these tools (instead of the current ones) to every later reply."""
        ...

    async def change_voice(self, voice_id: str) -> None:
        """Speak every later sentence in this voice (an unknown one is warned about)."""
        ...

    async def mute(self) -> None:
        """Stop treating input audio as speech; a turn in progress ends now."""
        ...

    async def unmute(self) -> None:
        """Treat input audio as speech again."""
        ...

    async def interrupt(self) -> None:
        """Stop the current response and drop queued ones, as the user's speech does (a key
        pressed on a phone call)."""
        ...

    async def close(self) -> None:
        """Stop all work and end the events() stream; idempotent."""
        ...


class EngineFactory(Protocol):
    """Built once per process; holds the models and makes one engine per conversation."""

    async def warm_up(self) -> None:
        """Load models ahead of the first conversation (call from the app's lifespan)."""
        ...

    async def aclose(self) -> None:
        """Release the models and clients the plug-ins hold (call when the app stops)."""
        ...

    async def speak_wav(self, text: str, *, voice_id: str, sample_rate: int) -> bytes:
        """`text` spoken whole in a voice, as a WAV file (a warm transfer's briefing)."""
        ...

    def create(
        self, config: SessionConfig, *, tool_runner: ToolRunner | None = None
    ) -> ConversationEngine:
        """Return a new engine for one conversation (not started: enter it with `async with`).

        `tool_runner` runs the calls of `config.tools` (None: every call is an error output).
        """
        ...
