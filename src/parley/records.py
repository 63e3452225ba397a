"""Frozen records that services return: plain values, independent of tables and wire."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Literal, Protocol, TypeVar

from parley.credentials import CredentialKind

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Organization:
    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    org_id: str
    name: str | None
    prefix: str
    last4: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class IssuedApiKey:
    """An API key at creation: the only moment its secret exists outside the caller."""

    api_key: ApiKey
    secret: str


@dataclass(frozen=True, slots=True)
class Project:
    id: str
    org_id: str
    name: str
    created_at: datetime
    default_agent: AgentRef | None = None
    """The agent the project names as its default (API.md section 17), if it still exists."""
    max_active_conversations: int | None = None
    """The project's cap on active conversations (None: only the workspace's applies)."""


@dataclass(frozen=True, slots=True)
class TemplateVariable:
    """A placeholder an agent declares (API.md section 12), with its default value."""

    default_value: str


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What a conversation keeps, and how long (API.md section 16): nothing at all with
    `zero_data_retention`; else the transcript and the recording, each deleted that many
    hours after the conversation ends (None: kept)."""

    zero_data_retention: bool = False
    transcripts_hours: int | None = None
    audio_hours: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The official SDK's `DataRetentionPolicy` shape (stored, shown and sent)."""
        if self.zero_data_retention:
            return {"zero_data_retention": True}
        return {
            "zero_data_retention": False,
            "transcripts": {"delete_after_hours": self.transcripts_hours},
            "audio_recordings": {"delete_after_hours": self.audio_hours},
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> RetentionPolicy:
        """Read `to_json`'s shape back; None is the default policy (everything kept)."""
        if not value:
            return cls()
        if value.get("zero_data_retention"):
            return cls(zero_data_retention=True)
        return cls(
            transcripts_hours=(value.get("transcripts") or {}).get("delete_after_hours"),
            audio_hours=(value.get("audio_recordings") or {}).get("delete_after_hours"),
        )


KEEP_EVERYTHING = RetentionPolicy()


@dataclass(frozen=True, slots=True)
class ConfigurationEndpoint:
    """An agent's configuration endpoint (API.md section 17), as stored: the values of
    `headers` and the signing `secret` sealed (services/configuration_endpoints.py unseals
    them for a call). `issued_secret` is the secret in clear on the one record returned by
    the change that made it (shown once), None on every record read back."""

    url: str
    headers: Mapping[str, str]
    timeout_ms: int
    secret: str
    issued_secret: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigurationEndpointSpec:
    """A configuration endpoint as a create or update gives it (header values in clear)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PronunciationEntry:
    """A word and how the agent says it: the text the synthesizer gets in its place."""

    word: str
    pronunciation: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """How an agent greets, speaks, tells the time and hears the end of a turn (API.md
    section 17; services/delivery.py has the rules). The official SDK's member names."""

    generate_welcome_message: bool = False
    """The model writes the welcome (the agent's `welcome_message` is not used)."""
    is_welcome_message_interruptible: bool = True
    audio_speed: float = 1.0
    timezone: str | None = None
    """An IANA zone; the model is told the local time in it (None: not told)."""
    pronunciation_dictionary: tuple[PronunciationEntry, ...] = ()
    vad_min_silence_duration_ms: int | None = None
    """The silence that ends the user's turn (None: the server's setting)."""
    vad_threshold: float | None = None
    """The speech probability at which the user starts speaking (None: the server's)."""

    def to_json(self) -> dict[str, Any]:
        """The stored (and shown) shape: the SDK's members."""
        return {
            "generate_welcome_message": self.generate_welcome_message,
            "is_welcome_message_interruptible": self.is_welcome_message_interruptible,
            "audio_speed": self.audio_speed,
            "timezone": self.timezone,
            "pronunciation_dictionary": [
                {"word": entry.word, "pronunciation": entry.pronunciation}
                for entry in self.pronunciation_dictionary
            ],
            "vad_min_silence_duration_ms": self.vad_min_silence_duration_ms,
            "vad_threshold": self.vad_threshold,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> Delivery:
        """Read `to_json`'s shape back; a missing member takes its default."""
        if not value:
            return DEFAULT_DELIVERY
        entries = value.get("pronunciation_dictionary") or ()
        return cls(
            generate_welcome_message=bool(value.get("generate_welcome_message", False)),
            is_welcome_message_interruptible=bool(
                value.get("is_welcome_message_interruptible", True)
            ),
            audio_speed=float(value.get("audio_speed", 1.0)),
            timezone=value.get("timezone"),
            pronunciation_dictionary=tuple(
                PronunciationEntry(entry["word"], entry["pronunciation"]) for entry in entries
            ),
            vad_min_silence_duration_ms=value.get("vad_min_silence_duration_ms"),
            vad_threshold=value.get("vad_threshold"),
        )


DEFAULT_DELIVERY = Delivery()


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    org_id: str
    project: ProjectRef
    name: str
    voice_id: str
    system_prompt: str
    welcome_message: str | None
    language: str
    audio_format: str
    phone_numbers: tuple[str, ...]
    disabled_at: datetime | None
    created_at: datetime
    updated_at: datetime
    tools: tuple[str, ...] = ()
    """Names of the tools the agent may call: its project's tools and built-ins."""
    template_variables: Mapping[str, TemplateVariable] = field(default_factory=dict)
    """The `{{name}}` placeholders its prompt and welcome message may use, with defaults."""
    boosted_keywords: tuple[str, ...] = ()
    no_input_poke_sec: int | None = None
    """Seconds of silence before the agent speaks `no_input_poke_text` (None: off)."""
    no_input_poke_text: str = "Are you still there?"
    no_input_end_conversation_sec: int | None = None
    """Seconds of silence before the conversation ends (None: off; API.md section 15)."""
    voicemail_message: str | None = None
    """Spoken once to an answering machine on an outbound call (None: hang up at once)."""
    data_retention_policy: RetentionPolicy = KEEP_EVERYTHING
    external_storage_policy: str | None = None
    """The name of the external storage policy its recordings go to (API.md section 16);
    None: the server's recordings directory."""
    external_storage_policy_id: str | None = None
    """That policy's ID: what the agent stores, so a renamed policy stays the agent's."""
    extraction_schemas: tuple[str, ...] = ()
    """Names of its project's extraction schemas, run after each of its calls (API.md 16)."""
    eval_prompts: tuple[str, ...] = ()
    """Names of its project's evaluation prompts, run after each of its calls (API.md 16)."""
    enable_redaction: bool = False
    """Personal data in what its conversations keep is replaced by tags, and by a tone in
    the recording (API.md section 16)."""
    configuration_endpoint: ConfigurationEndpoint | None = None
    """Called at each conversation's start (API.md section 17); None: none."""
    delivery: Delivery = DEFAULT_DELIVERY
    """How it greets, speaks and listens (API.md section 17)."""
    additional_languages: tuple[str, ...] = ()
    """Languages it also hears and speaks, besides `language` (API.md section 18)."""
    multilingual_mode: str | None = None
    """`auto`, `initial` or `request` (services/languages.py); None: `auto`."""
    version: int = 1
    """1 at creation, one more at each update (the SDK's `version_number`)."""

    @property
    def is_disabled(self) -> bool:
        return self.disabled_at is not None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing, with the cursor of the next page if there is one."""

    items: list[T]
    next_cursor: str | None


class Unset:
    """The type of UNSET: a field a partial update does not touch."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET = Unset()


@dataclass(frozen=True, slots=True)
class ProjectPatch:
    """A `PATCH /v1/projects/{nameOrId}`: the members given (`Unset`: left as they are);
    `default_agent` is an agent's name in the project, or None to clear it."""

    name: str | Unset = UNSET
    default_agent: str | Unset | None = UNSET
    max_active_conversations: int | Unset | None = UNSET


@dataclass(frozen=True, slots=True)
class Workspace:
    """An organization as the SDK's workspace shows it (API.md section 17)."""

    id: str
    name: str
    max_active_conversations: int | None
    ip_allowlist: tuple[str, ...]
    """Normalized CIDRs; empty: any address may use the organization's API keys."""
    invite_link_allowed_domains: tuple[str, ...]
    logo_url: str | None


@dataclass(frozen=True, slots=True)
class WorkspacePatch:
    """A `PATCH /v1/workspace`: the members given (`Unset`: left as they are)."""

    name: str | Unset = UNSET
    max_active_conversations: int | Unset | None = UNSET
    ip_allowlist: tuple[str, ...] | Unset = UNSET
    invite_link_allowed_domains: tuple[str, ...] | Unset = UNSET
    logo_url: str | Unset | None = UNSET


@dataclass(frozen=True, slots=True)
class DeliveryPatch:
    """Some members of a Delivery (an agent's PATCH, a socket's `config`): UNSET ones stay."""

    generate_welcome_message: bool | Unset = UNSET
    is_welcome_message_interruptible: bool | Unset = UNSET
    audio_speed: float | Unset = UNSET
    timezone: str | Unset | None = UNSET
    pronunciation_dictionary: tuple[PronunciationEntry, ...] | Unset = UNSET
    vad_min_silence_duration_ms: int | Unset | None = UNSET
    vad_threshold: float | Unset | None = UNSET

    def given(self) -> dict[str, Any]:
        """The members set, by name."""
        return {
            name: value
            for name in self.__slots__
            if not isinstance(value := getattr(self, name), Unset)
        }

    def applied_to(self, base: Delivery) -> Delivery:
        """`base` with the members set here replaced."""
        given = self.given()
        return replace(base, **given) if given else base


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """The fields of a new agent."""

    name: str
    voice_id: str
    system_prompt: str
    welcome_message: str | None
    language: str
    audio_format: str
    phone_numbers: tuple[str, ...]
    tools: tuple[str, ...] = ()
    template_variables: Mapping[str, TemplateVariable] = field(default_factory=dict)
    boosted_keywords: tuple[str, ...] = ()
    no_input_poke_sec: int | None = None
    no_input_poke_text: str = "Are you still there?"
    no_input_end_conversation_sec: int | None = None
    voicemail_message: str | None = None
    data_retention_policy: RetentionPolicy = KEEP_EVERYTHING
    external_storage_policy: str | None = None
    """A policy of the agent's project, by name (None: none)."""
    extraction_schemas: tuple[str, ...] = ()
    eval_prompts: tuple[str, ...] = ()
    enable_redaction: bool = False
    configuration_endpoint: ConfigurationEndpointSpec | None = None
    delivery: Delivery = DEFAULT_DELIVERY
    additional_languages: tuple[str, ...] = ()
    multilingual_mode: str | None = None


@dataclass(frozen=True, slots=True)
class AgentPatch:
    """A partial update of an agent: UNSET fields stay as they are."""

    name: str | Unset = UNSET
    voice_id: str | Unset = UNSET
    system_prompt: str | Unset = UNSET
    welcome_message: str | Unset | None = UNSET
    language: str | Unset = UNSET
    audio_format: str | Unset = UNSET
    phone_numbers: tuple[str, ...] | Unset = UNSET
    tools: tuple[str, ...] | Unset = UNSET
    template_variables: Mapping[str, TemplateVariable] | Unset = UNSET
    boosted_keywords: tuple[str, ...] | Unset = UNSET
    no_input_poke_sec: int | Unset | None = UNSET
    no_input_poke_text: str | Unset = UNSET
    no_input_end_conversation_sec: int | Unset | None = UNSET
    voicemail_message: str | Unset | None = UNSET
    data_retention_policy: RetentionPolicy | Unset = UNSET
    external_storage_policy: str | Unset | None = UNSET
    extraction_schemas: tuple[str, ...] | Unset = UNSET
    eval_prompts: tuple[str, ...] | Unset = UNSET
    enable_redaction: bool | Unset = UNSET
    configuration_endpoint: ConfigurationEndpointSpec | Unset | None = UNSET
    delivery: DeliveryPatch | Unset = UNSET
    additional_languages: tuple[str, ...] | Unset = UNSET
    multilingual_mode: str | Unset | None = UNSET


@dataclass(frozen=True, slots=True)
class AgentRef:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class JwtConfig:
    """An organization's stored JWT settings and the last good copy of its JWKS."""

    org_id: str
    audience: str
    jwks_url: str | None
    static_keys: tuple[Mapping[str, str], ...]
    require_jti: bool
    jwks_document: Mapping[str, Any] | None
    jwks_document_url: str | None
    """The URL `jwks_document` came from."""
    jwks_fetched_at: float | None
    jwks_max_age: int | None
    jwks_error: str | None


@dataclass(frozen=True, slots=True)
class ConversationItem:
    role: str
    text: str
    created_at: datetime
    tool_calls: tuple[ToolCall, ...] = ()
    id: str = ""
    """`item_…` (API.md section 17); "" only for an item not read from the database."""


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    org_id: str
    agent: AgentRef | None
    project: ProjectRef | None
    """None only for a conversation stored before projects were recorded by ID and name."""
    status: str
    end_user: str | None
    external_id: str | None
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime
    items: tuple[ConversationItem, ...]
    template_variables: Mapping[str, str] = field(default_factory=dict)
    """The template values the conversation used (API.md section 12)."""
    call_info: CallInfo | None = None
    """The phone call carrying the conversation (API.md section 13); None off the phone."""
    ended_by: str | None = None
    """Who or what ended it (API.md section 5): an `EndedBy`; None while it has not ended."""
    latencies_ms: tuple[int, ...] = ()
    """Per assistant reply to a user turn: end of the user's speech to its first audio."""
    interruptions_count: int = 0
    """How often the user spoke over the assistant."""
    turns: tuple[TurnTiming, ...] = ()
    """Per reply to a spoken user turn, its stages' timings (API.md section 18)."""
    call_settings: Mapping[str, Any] = field(default_factory=dict)
    """An outbound call's `config` overrides of its agent's settings (API.md section 15)."""
    answered_by: str | None = None
    """An outbound call's answering-machine verdict, once the carrier gave it."""
    transfer: Mapping[str, Any] | None = None
    """A phone transfer under way (services/transfers.py), None when there is none."""
    recording_key: str | None = None
    """Where its recording is kept (services/recordings.py); None until it is stored."""
    recording_policy_id: str | None = None
    """The external storage policy its recording is kept by; None: the recordings directory."""
    audio_url: str | None = None
    """The recording's signed URL (API.md section 16): set by the service that reads the
    conversation for a client, never stored."""
    transcripts_deleted_at: datetime | None = None
    audio_deleted_at: datetime | None = None
    summary: str | None = None
    """A few sentences by the language model (API.md section 16); None until written."""
    is_redacted: bool = False
    """It ran with redaction on (API.md section 16): what it keeps has personal data
    replaced by tags, and its recording a tone where that was said."""
    zero_data_retention: bool = False
    """Whether it went live under zero data retention (API.md section 16): no item text,
    recording or summary of it is ever stored."""
    workspace: str = ""
    """Its organization's name (the SDK's `workspace`)."""
    language: str | None = None
    audio_format: str | None = None
    """Its agent's `language` and `audio_format`; None without an agent."""
    replay_of: str | None = None
    """The conversation whose recording it replays (`conversations.replay`); else None."""
    heard_languages: tuple[str, ...] = ()
    """The languages the recognizer heard the user speak, in the order first heard."""
    additional_languages: tuple[str, ...] = ()
    multilingual_mode: str | None = None
    """Its agent's `additional_languages` and `multilingual_mode` (API.md section 18)."""
    test_run_id: str | None = None
    """The test run whose caller held it (API.md section 19); else None."""
    tool_overrides: Mapping[str, Any] | None = None
    """A test scenario's outputs answered in place of its webhook tools' endpoints."""

    @property
    def duration_ms(self) -> int | None:
        """Milliseconds from start to end, when both happened."""
        if self.started_at is None or self.ended_at is None:
            return None
        return round((self.ended_at - self.started_at).total_seconds() * 1000)


class Status(StrEnum):
    """A conversation's life (API.md section 5): `pending` -> `live` -> `ended`, or
    `pending` -> `ended`; only services/endings.py ends one."""

    PENDING = "pending"
    LIVE = "live"
    ENDED = "ended"


class EndedBy(StrEnum):
    """Who or what ended a conversation (API.md sections 5 and 15)."""

    USER = "user"
    ASSISTANT = "assistant"
    API = "api"
    TIMEOUT = "timeout"
    ERROR = "error"
    SHUTDOWN = "shutdown"
    BUSY = "busy"
    NO_ANSWER = "no_answer"
    FAILED = "failed"
    VOICEMAIL = "voicemail"
    TRANSFERRED = "transferred"
    ASSISTANT_SILENCE_LIMIT_REACHED = "assistant_silence_limit_reached"
    CONFIGURATION_ENDPOINT_TIMED_OUT = "configuration_endpoint_timed_out"
    CONFIGURATION_ENDPOINT_ERROR = "configuration_endpoint_error"
    CONFIGURATION_ENDPOINT_INVALID_RESPONSE = "configuration_endpoint_invalid_response"


@dataclass(frozen=True, slots=True)
class TurnTiming:
    """One reply to a spoken user turn, stage by stage, in milliseconds (API.md section 18):
    from the end of the user's speech (the last voiced audio arrived) to the end-of-turn
    decision, from there to the final words, from there to the model's first token, from
    the first sentence to its first audio; `total_ms` from the end of speech to the first
    audio sent; `played_ms` (calls) to the carrier's echo of the mark after it. `item_id`:
    the reply's assistant item, once stored (None: not stored, e.g. zero data retention)."""

    endpointing_ms: int
    transcription_ms: int
    model_first_token_ms: int
    speech_first_audio_ms: int
    total_ms: int
    played_ms: int | None = None
    item_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored and shown form: `item_id` first, then the stages."""
        return {
            "item_id": self.item_id,
            "endpointing_ms": self.endpointing_ms,
            "transcription_ms": self.transcription_ms,
            "model_first_token_ms": self.model_first_token_ms,
            "speech_first_audio_ms": self.speech_first_audio_ms,
            "total_ms": self.total_ms,
            "played_ms": self.played_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnTiming:
        return cls(
            endpointing_ms=int(data["endpointing_ms"]),
            transcription_ms=int(data["transcription_ms"]),
            model_first_token_ms=int(data["model_first_token_ms"]),
            speech_first_audio_ms=int(data["speech_first_audio_ms"]),
            total_ms=int(data["total_ms"]),
            played_ms=None if data.get("played_ms") is None else int(data["played_ms"]),
            item_id=data.get("item_id"),
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a live conversation went, as its socket measured it: stored when it ends, whoever
    ended it."""

    latencies_ms: tuple[int, ...] = ()
    interruptions_count: int = 0
    turns: tuple[TurnTiming, ...] = ()


@dataclass(frozen=True, slots=True)
class EndingCount:
    """How many of a day's conversations ended one way (the dashboard's overview)."""

    day: int
    """The day's place in the week asked for, 0 the first."""
    ended_by: str | None
    """An `EndedBy`; None for those that have not ended."""
    count: int


@dataclass(frozen=True, slots=True)
class ConversationTimings:
    """What one conversation measured of its replies, with the moment it was created
    (the dashboard's overview reads these a week at a time)."""

    created_at: datetime
    latencies_ms: tuple[int, ...]
    turns: tuple[Mapping[str, Any], ...] = ()
    """`analysis.turns` as stored: each reply's `<stage>_ms` (API.md section 18)."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """Who called which number, and the carrier's name for the call (API.md section 5)."""

    from_phone_number: str | None
    to_phone_number: str | None
    twilio_call_sid: str | None
    direction: str = "inbound"
    """`inbound` (the caller dialled the agent) or `outbound` (placed by the API)."""


@dataclass(frozen=True, slots=True)
class OutboundCallRequest:
    """`POST /v1/conversations/outbound_call` (API.md section 15), its types checked."""

    to_phone_number: str
    agent: str
    project: str | None
    from_phone_number: str | None
    settings: Mapping[str, Any]
    """The `config` members that change the agent's settings for this call, as given."""
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class TwilioAccount:
    """An organization's carrier account (API.md section 13); the auth token stays sealed."""

    org_id: str
    account_sid: str
    auth_token_last4: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class VoiceAnswer:
    """What the voice webhook answers: refuse the call, or stream it to a conversation.

    `conversation_id` and `stream_token` are None for a refused call; the token is shown
    here once and stored only as its SHA-256.
    """

    conversation_id: str | None = None
    stream_token: str | None = field(default=None, repr=False)
    hang_up: bool = False
    """A placed call whose conversation ended, or whose stream started: `<Hangup/>`."""

    @property
    def rejected(self) -> bool:
        return self.conversation_id is None


@dataclass(frozen=True, slots=True)
class SessionToken:
    id: str
    org_id: str
    conversation_ids: frozenset[str] | None
    expires_at: datetime
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class IssuedSessionToken:
    """A session token at creation: the only moment its secret exists outside the caller."""

    token: SessionToken
    secret: str


@dataclass(frozen=True, slots=True)
class ConversationToken:
    """A single-use token that opens one conversation with one agent (API.md section 17)."""

    org_id: str
    agent_id: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class IssuedConversationToken:
    """A conversation token at creation: the only moment its secret exists outside the caller."""

    token: ConversationToken
    secret: str


class TokenClaims(Protocol):
    """What a principal keeps of its verified JWT (`parley.jwt.VerifiedToken` is one): records
    sit below the JWT kernel, so they name the claims they read, not its class."""

    @property
    def sub(self) -> str: ...

    @property
    def conversation_id(self) -> str: ...

    @property
    def exp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the credential kind, its organization and the credential's ID.

    A JWT principal also carries its verified token; a session token its expiry and the
    conversations it is restricted to (None: any); a conversation token the one agent its
    conversation may have; an API key's secret that a rotation replaced, `superseded` and
    the end of its grace as `expires_at`. Built by services/authn.py.
    """

    kind: CredentialKind
    org_id: str
    credential_id: str
    token: TokenClaims | None = None
    conversation_ids: frozenset[str] | None = None
    expires_at: float | None = None
    agent_id: str | None = None
    superseded: bool = False

    def may_access(self, conversation_id: str) -> bool:
        """Tell whether this principal may read the conversation (API.md section 1)."""
        if self.kind == "jwt":
            return self.token is not None and self.token.conversation_id == conversation_id
        if self.kind == "conversation_token":
            return False  # it opens one new conversation and reads none (API.md section 17)
        return self.conversation_ids is None or conversation_id in self.conversation_ids


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a change, as the audit trail records it: never a secret.

    `kind` is the credential kind (`api_key`, `session_token`, `jwt`), `dashboard` (a
    dashboard session, `id` the API key that opened it), `operator` (the CLI) or `system`.
    """

    kind: str
    id: str | None
    client: str | None = None
    request_id: str | None = None


OPERATOR = Actor(kind="operator", id=None)
SYSTEM = Actor(kind="system", id=None)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One link of an organization's hash chain of changes."""

    org_id: str
    seq: int
    action: str
    target: str
    actor_kind: str
    actor_id: str | None
    client: str | None
    request_id: str | None
    details: dict[str, Any]
    created_at: datetime
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class DashboardSession:
    """A signed-in dashboard browser: the organization and the API key that opened it."""

    org_id: str
    api_key_id: str
    created_at: datetime
    expires_at: datetime


# --- tools (API.md section 12) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectRef:
    """A project as records show it: `{"id", "name"}` (API.md sections 4, 5 and 12)."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Tool:
    """A custom tool of a project: a webhook the service calls, or a client-side tool.

    `parameters` is stored in the form given (a JSON Schema object or the official SDK's flat
    list); `signing_secret` is the tool's `whsec_…` secret in clear, for signing calls only:
    it is stored encrypted and never leaves through the API after creation.
    """

    id: str
    org_id: str
    project: ProjectRef
    name: str
    description: str
    type: str
    """`custom_webhook`, `custom_websocket`, `built_in_transfer_to_phone_number` or
    `built_in_transfer_to_agent`."""
    execution_mode: str
    """`sync` or `async`."""
    parameters: Any
    parameter_locations: Mapping[str, str] | None
    endpoint_method: str | None
    endpoint_url: str | None
    endpoint_headers: Mapping[str, str] | None
    endpoint_timeout_ms: int | None
    tool_call_output_timeout_ms: int | None
    require_speech_before_tool_call: bool
    signing_secret: str
    created_at: datetime
    updated_at: datetime
    phone_number: str | None = None
    """A phone transfer's target (E.164); None: the model gives it (API.md section 15)."""
    dtmf: str | None = None
    """Keys sent once a phone transfer's target answers (an extension)."""
    dynamic_dtmf: bool | None = None
    use_agent_phone_number: bool | None = None
    """Caller ID of a phone transfer: the agent's number, else the caller's."""
    keep_listening: bool | None = None
    """A warm phone transfer: the target hears a briefing before the bridge."""
    post_transfer_message: str | None = None
    on_transfer_no_answer: str | None = None
    """`return_to_assistant` or `keep_retrying` (up to 3 dials)."""
    detect_voicemail: bool | None = None
    agents_to_transfer_to: tuple[str, ...] | None = None
    """An agent transfer's choices: agent names of the tool's project."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool in a conversation, as stored on the assistant item of its turn.

    `tool` is `{"id", "name"}` (`inline_<name>` for an inline WebSocket tool, the built-in's
    name for `natural_conversation_ending`); `output` is the webhook's JSON answer, the
    client's output, or `{"error": "<why>"}`.
    """

    id: str
    tool_id: str
    tool_name: str
    parameters: Any
    output: Any
    endpoint_url: str | None = None
    response_status_code: int | None = None
    duration_ms: int | None = None
    timed_out: bool = False
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """The fields of a new tool (API.md section 12), already checked by services/tools.py."""

    name: str
    description: str
    type: str
    execution_mode: str
    parameters: Any
    parameter_locations: Mapping[str, str] | None = None
    endpoint_method: str | None = None
    endpoint_url: str | None = None
    endpoint_headers: Mapping[str, str] | None = None
    endpoint_timeout_ms: int | None = None
    tool_call_output_timeout_ms: int | None = None
    require_speech_before_tool_call: bool = False
    phone_number: str | None = None
    """A phone transfer's target (E.164); None: the model gives it (API.md section 15)."""
    dtmf: str | None = None
    """Keys sent once a phone transfer's target answers (an extension)."""
    dynamic_dtmf: bool | None = None
    use_agent_phone_number: bool | None = None
    """Caller ID of a phone transfer: the agent's number, else the caller's."""
    keep_listening: bool | None = None
    """A warm phone transfer: the target hears a briefing before the bridge."""
    post_transfer_message: str | None = None
    on_transfer_no_answer: str | None = None
    """`return_to_assistant` or `keep_retrying` (up to 3 dials)."""
    detect_voicemail: bool | None = None
    agents_to_transfer_to: tuple[str, ...] | None = None
    """An agent transfer's choices: agent names of the tool's project."""


@dataclass(frozen=True, slots=True)
class ToolPatch:
    """A partial update of a tool: UNSET fields stay as they are."""

    name: str | Unset = UNSET
    description: str | Unset = UNSET
    type: str | Unset = UNSET
    execution_mode: str | Unset = UNSET
    parameters: Any = UNSET
    parameter_locations: Mapping[str, str] | Unset | None = UNSET
    endpoint_method: str | Unset | None = UNSET
    endpoint_url: str | Unset | None = UNSET
    endpoint_headers: Mapping[str, str] | Unset | None = UNSET
    endpoint_timeout_ms: int | Unset | None = UNSET
    tool_call_output_timeout_ms: int | Unset | None = UNSET
    require_speech_before_tool_call: bool | Unset = UNSET
    phone_number: str | Unset | None = UNSET
    dtmf: str | Unset | None = UNSET
    dynamic_dtmf: bool | Unset | None = UNSET
    use_agent_phone_number: bool | Unset | None = UNSET
    keep_listening: bool | Unset | None = UNSET
    post_transfer_message: str | Unset | None = UNSET
    on_transfer_no_answer: str | Unset | None = UNSET
    detect_voicemail: bool | Unset | None = UNSET
    agents_to_transfer_to: tuple[str, ...] | Unset | None = UNSET


@dataclass(frozen=True, slots=True)
class IssuedTool:
    """A tool at creation: the only moment its signing secret leaves the service."""

    tool: Tool
    signing_secret: str


AddressingStyle = Literal["path", "virtual"]
"""Where a request to an S3-compatible store names the bucket: in the path
(`https://host/bucket/key`) or in the host (`https://bucket.host/key`)."""


@dataclass(frozen=True, slots=True)
class StoragePolicy:
    """An external storage policy (API.md section 16): the S3-compatible bucket that the
    recordings of the agents naming it go to. Its credentials are no part of it: they stay
    sealed in the database, unsealed only into `StorageSettings`."""

    id: str
    org_id: str
    project: ProjectRef
    name: str
    endpoint_url: str
    bucket: str
    region: str | None
    key_prefix: str | None
    addressing_style: AddressingStyle
    agent_count: int
    """How many agents name it."""
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class StoragePolicySpec:
    """The fields of a new external storage policy, its credentials in clear."""

    name: str
    endpoint_url: str
    bucket: str
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    region: str | None = None
    key_prefix: str | None = None
    addressing_style: AddressingStyle = "path"


@dataclass(frozen=True, slots=True)
class StoragePolicyPatch:
    """A partial update of an external storage policy: UNSET fields stay as they are."""

    name: str | Unset = UNSET
    endpoint_url: str | Unset = UNSET
    bucket: str | Unset = UNSET
    region: str | Unset | None = UNSET
    key_prefix: str | Unset | None = UNSET
    addressing_style: AddressingStyle | Unset = UNSET
    access_key_id: str | Unset = field(default=UNSET, repr=False)
    secret_access_key: str | Unset = field(default=UNSET, repr=False)


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """What an uploader needs to write to a policy's bucket: its credentials in clear
    (`services.storage_policies.policy_store_settings`; never shown, never logged)."""

    policy_id: str
    endpoint_url: str
    bucket: str
    region: str | None
    key_prefix: str | None
    addressing_style: AddressingStyle
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Webhook:
    """An organization's endpoint for events (API.md section 14); never its secret."""

    id: str
    org_id: str
    url: str
    event_types: tuple[str, ...]
    description: str
    disabled_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def is_disabled(self) -> bool:
        return self.disabled_at is not None


@dataclass(frozen=True, slots=True)
class WebhookPatch:
    """A partial update of a webhook: UNSET fields stay as they are."""

    url: str | Unset = UNSET
    event_types: tuple[str, ...] | Unset = UNSET
    description: str | Unset = UNSET
    is_disabled: bool | Unset = UNSET


@dataclass(frozen=True, slots=True)
class IssuedWebhook:
    """A webhook at creation: the only moment its secret leaves the service."""

    webhook: Webhook
    secret: str


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """One event sent to one webhook, as its owner sees it (API.md section 14)."""

    id: str
    """The `msg_…` ID: `webhook-id` on every attempt."""
    webhook_id: str
    event_type: str
    status: str
    """`pending`, `delivered` or `failed`."""
    attempts: int
    last_attempt_at: datetime | None
    last_status_code: int | None
    next_attempt_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A claimed delivery with what its attempt needs; secrets still sealed."""

    id: str
    webhook_id: str
    org_id: str
    url: str
    body: str
    attempts: int
    """Attempts made before this one."""
    secret_sealed: str
    previous_secret_sealed: str | None
    previous_secret_expires_at: datetime | None


# --- after the call (API.md section 16) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractionField:
    """One field of an extraction schema: its name, `string`, `int`, `float` or `bool`, and
    what it means (None: the name says it)."""

    name: str
    type: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ExtractionSchemaSpec:
    """The fields of a new extraction schema."""

    name: str
    prompt: str
    fields: tuple[ExtractionField, ...]


@dataclass(frozen=True, slots=True)
class ExtractionSchemaPatch:
    """A partial update of an extraction schema: UNSET fields stay as they are."""

    name: str | Unset = UNSET
    prompt: str | Unset = UNSET
    fields: tuple[ExtractionField, ...] | Unset = UNSET


@dataclass(frozen=True, slots=True)
class ExtractionSchema:
    id: str
    org_id: str
    project: ProjectRef
    name: str
    prompt: str
    fields: tuple[ExtractionField, ...]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Extraction:
    """What the model extracted from a conversation with a schema: a value (or None, not
    given) per field."""

    id: str
    conversation_id: str
    schema_id: str
    schema_name: str
    """The schema's name when the extraction was made."""
    result: Mapping[str, Any]
    created_at: datetime
    schema_deleted: bool = False
    """Whether the schema has been deleted since (the official SDK's `isDeleted`)."""


@dataclass(frozen=True, slots=True)
class EvalPrompt:
    """What a project's conversations are judged against."""

    id: str
    org_id: str
    project: ProjectRef
    name: str
    prompt: str
    created_at: datetime


class EvaluationResult(StrEnum):
    """The verdict of an evaluation; `error` when the model gave no usable one."""

    SUCCESSFUL = "successful"
    UNSUCCESSFUL = "unsuccessful"
    UNDECIDED = "undecided"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Evaluation:
    id: str
    conversation_id: str
    prompt_id: str
    prompt_name: str
    """The prompt's name when the evaluation was made."""
    result: str
    """An EvaluationResult's value."""
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Scenario:
    """A test scenario (API.md section 19): a caller and what it expects of an agent.

    `spec` is the scenario as checked (services/scenarios.py), its name excluded: `agent`,
    `caller`, `transport`, `template_variables`, `expect` and `tool_overrides`."""

    id: str
    org_id: str
    project: ProjectRef
    name: str
    spec: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime


class RunStatus(StrEnum):
    """A test run's life: `queued` -> `running` -> `passed` | `failed` | `error`."""

    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """How one scenario of a run went: each failure names its expectation and what happened."""

    scenario: str
    passed: bool
    failures: tuple[str, ...]
    conversation_id: str | None
    latencies_ms: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    """A test run: the scenarios it was made with (name and spec) and their results."""

    id: str
    org_id: str
    project_id: str
    status: RunStatus
    scenarios: tuple[Mapping[str, Any], ...]
    results: tuple[ScenarioResult, ...]
    server_url: str
    claimed_by: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
