"""Wire models: the JSON contract of API.md, separate from tables and records.

Inputs are strict (no coercion, unknown fields refused); outputs mirror API.md exactly.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
)

from parley.api.agent_sdk_schemas import (
    DeliveryIn,
    DeliveryUpdate,
    PronunciationOut,
    UnsupportedAgentMembers,
)
from parley.clock import isoformat, isoformat_or_none
from parley.engine.audio import AudioFormat as EngineAudioFormat
from parley.ids import NAME_RULE, is_valid_name
from parley.records import (
    Agent,
    ApiKey,
    AuditEvent,
    ConfigurationEndpointSpec,
    Project,
    ProjectRef,
    RetentionPolicy,
)
from parley.services import agents, silence
from parley.services.api_keys import MAX_NAME_LENGTH as MAX_KEY_NAME
from parley.services.event_payloads import agent_delivery_json, configuration_endpoint_json
from parley.services.templates import NAME_RULE as VARIABLE_NAME_RULE
from parley.services.templates import is_variable_name
from parley.text import JsonObject, Label, Text

_E164 = re.compile(r"\+[1-9][0-9]{1,14}")
_PRIMARY_LANGUAGE = re.compile(r"[a-z]{2,3}")


def _audio_format(value: str) -> str:
    if value not in EngineAudioFormat.names():
        raise ValueError(f"must be one of {EngineAudioFormat.listed()}")
    return value


# The engine's enum is the one list of formats; the schema shows it as a string enum.
AudioFormat = Annotated[
    str,
    AfterValidator(_audio_format),
    Field(json_schema_extra={"enum": list(EngineAudioFormat.names())}),
]


def _primary_language(value: str) -> str:
    if not _PRIMARY_LANGUAGE.fullmatch(value):
        raise ValueError("must be a BCP 47 primary language tag in lower case, such as en or de")
    return value


# The shape only: services/voices.py refuses a language the installed recognizer does not
# hear (400 unsupported_language), since which ones it hears depends on PARLEY_STT_MODEL.
Language = Annotated[
    str,
    AfterValidator(_primary_language),
    Field(
        description="A BCP 47 primary language tag (`en`, `de`, `es`, ...) that the installed "
        "speech model hears; English only with the default tiny.en.",
        examples=["en"],
    ),
]


AdditionalLanguages = Annotated[
    list[Language],
    Field(
        max_length=100,  # the service allows 4 (services/languages.py), and says so
        description="Languages the agent also hears and speaks (at most 4; not the default).",
    ),
]
MultilingualMode = Annotated[
    Literal["auto", "initial", "request"],
    Field(
        description="`auto`: each turn's language is detected and answered in; `initial`: "
        "the first turn decides; `request`: the user asks to switch. Null: `auto`."
    ),
]


def _name(value: str) -> str:
    if not is_valid_name(value):
        raise ValueError(NAME_RULE)
    return value


def _e164(value: str) -> str:
    if not _E164.fullmatch(value):
        raise ValueError("must be an E.164 phone number such as +14155550123")
    return value


def _distinct(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("must not repeat a phone number")
    return values


# The pattern is documentation only: `_name` checks it (and the ID shape) with our own message.
Name = Annotated[
    str,
    AfterValidator(_name),
    Field(json_schema_extra={"pattern": "^[a-z0-9][a-z0-9_-]{0,63}$", "maxLength": 64}),
]
PhoneNumber = Annotated[str, AfterValidator(_e164)]
PhoneNumbers = Annotated[list[PhoneNumber], Field(max_length=20), AfterValidator(_distinct)]
VoiceId = Annotated[Label, StringConstraints(min_length=1, max_length=100)]
SystemPrompt = Annotated[Text, StringConstraints(max_length=20_000)]
WelcomeMessage = Annotated[Text, StringConstraints(max_length=2_000)]
Timestamp = Annotated[str, Field(examples=["2026-11-21T10:00:00.000Z"])]
StoragePolicyName = Annotated[Label, StringConstraints(min_length=1, max_length=64)]


class Input(BaseModel):
    """Base of request bodies: strict types, no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True)


# --- errors ---------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    message: str
    code: str


class ErrorOut(BaseModel):
    """The envelope of every non-2xx answer (the spec's BasicError under `error`)."""

    error: ErrorDetail
    param_errors: dict[str, str] | None = Field(
        default=None, description="Field -> message, on 400 validation failures only."
    )


class SuccessOut(BaseModel):
    success: bool


# --- API keys -------------------------------------------------------------------------


class ApiKeyCreate(Input):
    name: Annotated[Label, StringConstraints(min_length=1, max_length=MAX_KEY_NAME)] | None = None


class ApiKeyOut(BaseModel):
    id: str
    name: str | None
    prefix: str
    last4: str
    created_at: Timestamp

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyOut:
        return cls(
            id=key.id,
            name=key.name,
            prefix=key.prefix,
            last4=key.last4,
            created_at=isoformat(key.created_at),
        )


class ApiKeyCreated(BaseModel):
    """The official SDK's `ApiKeyWithSecret` with the listing's members (API.md section 2)."""

    id: str
    name: str | None
    api_key: str = Field(description="The key itself: shown once, never again.")
    prefix: str
    last4: str
    created_at: Timestamp
    secret: str = Field(description="The same secret as `api_key`, under its older name.")

    @classmethod
    def of(cls, key: ApiKey, secret: str) -> ApiKeyCreated:
        return cls(
            id=key.id,
            name=key.name,
            api_key=secret,
            prefix=key.prefix,
            last4=key.last4,
            created_at=isoformat(key.created_at),
            secret=secret,
        )


class ApiKeyUpdate(Input):
    name: Annotated[Label, StringConstraints(min_length=1, max_length=MAX_KEY_NAME)]


class ApiKeyRotate(Input):
    grace_seconds: int = Field(
        default=0,
        description="How long the replaced secret keeps working, 0 to 86400 seconds.",
    )


class ApiKeyRotated(BaseModel):
    """The official SDK's `ApiKeyWithSecret` (API.md section 17)."""

    id: str
    name: str | None
    api_key: str = Field(description="The new secret: shown once, never again.")


class ApiKeyList(BaseModel):
    api_keys: list[ApiKeyOut]
    next_cursor: str | None


# --- projects -------------------------------------------------------------------------


class ProjectCreate(Input):
    name: Name


class ProjectDefaultAgentOut(BaseModel):
    id: str
    name: str


class ProjectOut(BaseModel):
    """A project (API.md sections 3 and 17, the SDK's `Project`)."""

    id: str
    name: str
    default_agent: ProjectDefaultAgentOut | None
    active_conversations: int
    max_active_conversations: int | None
    created_at: Timestamp

    @classmethod
    def of(cls, project: Project, active_conversations: int = 0) -> ProjectOut:
        default = project.default_agent
        return cls(
            id=project.id,
            name=project.name,
            default_agent=(
                ProjectDefaultAgentOut(id=default.id, name=default.name) if default else None
            ),
            active_conversations=active_conversations,
            max_active_conversations=project.max_active_conversations,
            created_at=isoformat(project.created_at),
        )


class ProjectEnvelope(BaseModel):
    project: ProjectOut


class ProjectList(BaseModel):
    projects: list[ProjectOut]
    next_cursor: str | None


# --- agents ---------------------------------------------------------------------------


def _variable_names(values: dict[str, Any]) -> dict[str, Any]:
    for name in values:
        if not is_variable_name(name):
            raise ValueError(f"{name!r}: a template variable's name {VARIABLE_NAME_RULE}")
    return values


def _distinct_names(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("must not repeat a name")
    return values


class TemplateVariableIn(Input):
    default_value: Annotated[Text, StringConstraints(max_length=2_000)]


ToolNames = Annotated[
    list[Annotated[Label, StringConstraints(min_length=1, max_length=64)]],
    Field(max_length=64),
    AfterValidator(_distinct_names),
]
AnalysisNames = Annotated[
    list[Annotated[Label, StringConstraints(min_length=1, max_length=100)]],
    Field(max_length=20),
    AfterValidator(_distinct_names),
]
"""An agent's `extraction_schemas` or `eval_prompts`: names in its project (API.md 16)."""
TemplateVariables = Annotated[
    dict[str, TemplateVariableIn], Field(max_length=100), AfterValidator(_variable_names)
]
BoostedKeywords = Annotated[
    list[Annotated[Label, StringConstraints(min_length=1, max_length=64)]], Field(max_length=100)
]

PokeSec = Annotated[int, Field(ge=silence.POKE_SEC_RANGE[0], le=silence.POKE_SEC_RANGE[1])]
EndSec = Annotated[int, Field(ge=silence.END_SEC_RANGE[0], le=silence.END_SEC_RANGE[1])]
PokeText = Annotated[Text, StringConstraints(min_length=1, max_length=silence.MAX_POKE_TEXT)]
VoicemailMessage = Annotated[Text, StringConstraints(min_length=1, max_length=2_000)]


RetentionHours = Annotated[int, Field(ge=0, le=87_600)]  # ten years at most


class RetentionWindowIn(Input):
    delete_after_hours: RetentionHours | None = None


class ZeroRetentionIn(Input):
    """Nothing is stored: no item text, tool call record, audio or summary."""

    zero_data_retention: Literal[True]


class WindowedRetentionIn(Input):
    """The transcript and the recording each deleted that many hours after the end
    (null: kept)."""

    zero_data_retention: Literal[False] = False
    transcripts: RetentionWindowIn = Field(default_factory=RetentionWindowIn)
    audio_recordings: RetentionWindowIn = Field(default_factory=RetentionWindowIn)


DataRetentionPolicyIn = ZeroRetentionIn | WindowedRetentionIn


def retention_policy(given: DataRetentionPolicyIn) -> RetentionPolicy:
    """The record of a retention policy as the API takes it (API.md section 16)."""
    if isinstance(given, ZeroRetentionIn):
        return RetentionPolicy(zero_data_retention=True)
    return RetentionPolicy(
        transcripts_hours=given.transcripts.delete_after_hours,
        audio_hours=given.audio_recordings.delete_after_hours,
    )


# --- an agent's configuration endpoint (API.md section 17) -----------------------------

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")


def _header_names(values: dict[str, str]) -> dict[str, str]:
    for name in values:
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an HTTP header name")
    return values


class ConfigurationEndpointIn(Input):
    """The official SDK's `{"url", "headers"?, "timeout_ms"?}`."""

    url: Annotated[Label, StringConstraints(min_length=1, max_length=2048)]
    headers: (
        Annotated[
            dict[str, Annotated[Label, StringConstraints(max_length=4096)]],
            Field(max_length=20),
            AfterValidator(_header_names),
        ]
        | None
    ) = Field(
        default=None,
        description="Sent with each call; a value given as `********` keeps the stored one.",
    )
    timeout_ms: int | None = Field(default=None, description="100-10000; default 3000.")

    def spec(self) -> ConfigurationEndpointSpec:
        return ConfigurationEndpointSpec(
            url=self.url, headers=dict(self.headers or {}), timeout_ms=self.timeout_ms
        )


class ConfigurationEndpointOut(BaseModel):
    """The header values are masked (`********`): they are secrets."""

    url: str
    headers: dict[str, str]
    timeout_ms: int


class AgentCreate(Input, DeliveryIn, UnsupportedAgentMembers):
    name: Name
    project: Annotated[Label, StringConstraints(max_length=64)] | None = Field(
        default=None, description="Project name or ID; default `main`."
    )
    voice_id: VoiceId = agents.DEFAULT_VOICE_ID
    system_prompt: SystemPrompt = agents.DEFAULT_SYSTEM_PROMPT
    welcome_message: WelcomeMessage | None = None
    language: Language = agents.DEFAULT_LANGUAGE
    default_language: Language | None = Field(
        default=None, description="The SDK's name of `language`; given both, this one wins."
    )
    additional_languages: AdditionalLanguages = Field(default_factory=list)
    multilingual_mode: MultilingualMode | None = None
    audio_format: AudioFormat = agents.DEFAULT_AUDIO_FORMAT
    phone_numbers: PhoneNumbers = Field(default_factory=list)
    tools: ToolNames = Field(
        default_factory=list,
        description="Tools of the agent's project, or `natural_conversation_ending`.",
    )
    template_variables: TemplateVariables = Field(default_factory=dict)
    boosted_keywords: BoostedKeywords = Field(default_factory=list)
    no_input_poke_sec: PokeSec | None = Field(
        default=None, description="Seconds of silence before the poke; null: off."
    )
    no_input_poke_text: PokeText = silence.DEFAULT_POKE_TEXT
    no_input_end_conversation_sec: EndSec | None = Field(
        default=None, description="Seconds of silence before the conversation ends; null: off."
    )
    voicemail_message: VoicemailMessage | None = Field(
        default=None,
        description="Spoken once to an answering machine on an outbound call; null: hang up.",
    )
    data_retention_policy: DataRetentionPolicyIn = Field(
        default_factory=WindowedRetentionIn,
        description="What its conversations keep, and how long; default: everything, kept.",
    )
    external_storage_policy: StoragePolicyName | None = Field(
        default=None,
        description="An external storage policy of the agent's project, by name; null: none.",
    )
    extraction_schemas: AnalysisNames = Field(
        default_factory=list,
        description="Extraction schemas of the agent's project, run after each call.",
    )
    eval_prompts: AnalysisNames = Field(
        default_factory=list,
        description="Evaluation prompts of the agent's project, run after each call.",
    )
    enable_redaction: bool = Field(
        default=False,
        description="Personal data in what its conversations keep replaced by tags.",
    )
    configuration_endpoint: ConfigurationEndpointIn | None = Field(
        default=None, description="Called at each conversation's start; null: none."
    )


class AgentUpdate(Input, DeliveryUpdate, UnsupportedAgentMembers):
    """A partial update: only the fields present change. `project` cannot change."""

    name: Name | None = None
    voice_id: VoiceId | None = None
    system_prompt: SystemPrompt | None = None
    welcome_message: WelcomeMessage | None = None
    language: Language | None = None
    default_language: Language | None = None
    additional_languages: AdditionalLanguages | None = None
    multilingual_mode: MultilingualMode | None = None
    audio_format: AudioFormat | None = None
    phone_numbers: PhoneNumbers | None = None
    tools: ToolNames | None = None
    template_variables: TemplateVariables | None = None
    boosted_keywords: BoostedKeywords | None = None
    no_input_poke_sec: PokeSec | None = None
    no_input_poke_text: PokeText | None = None
    no_input_end_conversation_sec: EndSec | None = None
    voicemail_message: VoicemailMessage | None = None
    data_retention_policy: DataRetentionPolicyIn | None = None
    external_storage_policy: StoragePolicyName | None = None
    extraction_schemas: AnalysisNames | None = None
    eval_prompts: AnalysisNames | None = None
    enable_redaction: bool | None = None
    configuration_endpoint: ConfigurationEndpointIn | None = None

    NULLABLE: ClassVar[frozenset[str]] = frozenset(
        {
            "configuration_endpoint",
            "welcome_message",
            "no_input_poke_sec",
            "no_input_end_conversation_sec",
            "voicemail_message",
            "external_storage_policy",
            "multilingual_mode",
            *DeliveryUpdate.NULLABLE_DELIVERY,
        }
    )

    def null_fields(self) -> list[str]:
        """Return the fields sent as null that may not be null."""
        return [
            name
            for name in self.model_fields_set
            if getattr(self, name) is None and name not in self.NULLABLE
        ]


class PhoneNumbersRelease(Input):
    phone_numbers: PhoneNumbers | None = Field(
        default=None, description="The numbers to release; omitted: all of them."
    )

    @field_validator("phone_numbers", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        """Only an omitted field means all: `null` is more likely a client's bug."""
        if value is None:
            raise ValueError("may not be null (omit it to release every number)")
        return value


class ProjectRefOut(BaseModel):
    id: str
    name: str

    @classmethod
    def of(cls, project: ProjectRef) -> ProjectRefOut:
        return cls(id=project.id, name=project.name)


class TemplateVariableOut(BaseModel):
    default_value: str


class AgentOut(BaseModel):
    id: str
    name: str
    project: ProjectRefOut
    is_disabled: bool
    disabled_at: Timestamp | None
    phone_numbers: list[str]
    voice_id: str
    system_prompt: str
    welcome_message: str | None
    language: str
    audio_format: str
    tools: list[str]
    template_variables: dict[str, TemplateVariableOut]
    boosted_keywords: list[str]
    no_input_poke_sec: int | None
    no_input_poke_text: str
    no_input_end_conversation_sec: int | None
    voicemail_message: str | None
    data_retention_policy: dict[str, Any]
    external_storage_policy: str | None
    extraction_schemas: list[str]
    eval_prompts: list[str]
    enable_redaction: bool
    configuration_endpoint: ConfigurationEndpointOut | None
    created_at: Timestamp
    updated_at: Timestamp
    # The delivery (API.md section 17), then the SDK's required members of features Parley
    # does not have, with the values that say so: services/event_payloads.py builds them.
    generate_welcome_message: bool
    is_welcome_message_interruptible: bool
    audio_speed: float
    timezone: str | None
    pronunciation_dictionary: list[PronunciationOut]
    vad_min_silence_duration_ms: int | None
    vad_threshold: float | None
    additional_voice_ids: list[str]
    background_noise_level: float
    background_noise: str | None
    listen_only_inbound_enabled: bool
    tasks: list[dict[str, Any]]
    generate_no_input_poke_text: bool
    push_to_talk: bool
    built_in_tool_configs: dict[str, Any]
    default_language: str
    additional_languages: list[str]
    multilingual_mode: str | None
    min_words_to_interrupt: int
    intelligence_level: str | None

    @classmethod
    def of(cls, agent: Agent) -> AgentOut:
        return cls(
            id=agent.id,
            name=agent.name,
            project=ProjectRefOut.of(agent.project),
            is_disabled=agent.is_disabled,
            disabled_at=isoformat_or_none(agent.disabled_at),
            phone_numbers=list(agent.phone_numbers),
            voice_id=agent.voice_id,
            system_prompt=agent.system_prompt,
            welcome_message=agent.welcome_message,
            language=agent.language,
            audio_format=agent.audio_format,
            tools=list(agent.tools),
            template_variables={
                name: TemplateVariableOut(default_value=variable.default_value)
                for name, variable in agent.template_variables.items()
            },
            boosted_keywords=list(agent.boosted_keywords),
            no_input_poke_sec=agent.no_input_poke_sec,
            no_input_poke_text=agent.no_input_poke_text,
            no_input_end_conversation_sec=agent.no_input_end_conversation_sec,
            voicemail_message=agent.voicemail_message,
            data_retention_policy=agent.data_retention_policy.to_json(),
            external_storage_policy=agent.external_storage_policy,
            extraction_schemas=list(agent.extraction_schemas),
            eval_prompts=list(agent.eval_prompts),
            enable_redaction=agent.enable_redaction,
            configuration_endpoint=_endpoint_out(agent),
            created_at=isoformat(agent.created_at),
            updated_at=isoformat(agent.updated_at),
            **agent_delivery_json(agent),
        )


def _endpoint_out(agent: Agent) -> ConfigurationEndpointOut | None:
    shown = configuration_endpoint_json(agent.configuration_endpoint)
    return ConfigurationEndpointOut(**shown) if shown is not None else None


def issued_endpoint_secret(agent: Agent) -> str | None:
    """The configuration endpoint's secret when the change that returned `agent` made it."""
    endpoint = agent.configuration_endpoint
    return endpoint.issued_secret if endpoint is not None else None


class AgentEnvelope(BaseModel):
    agent: AgentOut


class _ShowsIssuedSecret(BaseModel):
    """`configuration_endpoint_secret` appears only in the answer of the change that made
    it (shown once); every other answer has no such member."""

    configuration_endpoint_secret: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent_secret(self, handler: SerializerFunctionWrapHandler) -> Any:
        shown = handler(self)
        if isinstance(shown, dict) and shown.get("configuration_endpoint_secret") is None:
            shown.pop("configuration_endpoint_secret", None)
        return shown


class AgentChanged(AgentEnvelope, _ShowsIssuedSecret):
    """`PATCH /v1/agents/{nameOrId}`: `{"agent"}`, the official SDK's `success` and
    `version_number` (the agent's version after the change: 1 at creation, one more at each
    update), and the configuration endpoint's secret when this change gave the agent its
    endpoint."""

    success: bool = True
    version_number: int

    @classmethod
    def of(cls, agent: Agent) -> AgentChanged:
        secret = issued_endpoint_secret(agent)
        return cls(
            agent=AgentOut.of(agent),
            version_number=agent.version,
            configuration_endpoint_secret=secret,
        )


class AgentCreated(AgentEnvelope, _ShowsIssuedSecret):
    """`{"agent"}` as API.md section 4 says, plus the official SDK's `id` and `name`
    (its create call reads only those; docs/decisions.md), and the configuration
    endpoint's secret when one was set."""

    id: str
    name: str

    @classmethod
    def of(cls, agent: Agent) -> AgentCreated:
        return cls(
            agent=AgentOut.of(agent),
            id=agent.id,
            name=agent.name,
            configuration_endpoint_secret=issued_endpoint_secret(agent),
        )


class AgentUpsert(AgentCreate):
    """`PUT /v1/agents/upsert`: the agent named `name` made or replaced; the members not
    given take their defaults (API.md section 17)."""


class AgentUpserted(AgentCreated):
    """The official SDK's `AgentsUpsertResponse`, with `id` and `name` as at creation."""

    inserted: bool
    updated: bool

    @classmethod
    def upserted(cls, agent: Agent, *, inserted: bool) -> AgentUpserted:
        return cls(
            agent=AgentOut.of(agent),
            id=agent.id,
            name=agent.name,
            configuration_endpoint_secret=issued_endpoint_secret(agent),
            inserted=inserted,
            updated=not inserted,
        )


class AgentList(BaseModel):
    agents: list[AgentOut]
    next_cursor: str | None


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Describe the error answers of a route in OpenAPI, all with the envelope."""
    descriptions = {
        400: "Invalid request (validation errors carry `param_errors`).",
        401: "Missing or invalid credential.",
        403: "Forbidden: another organization's resource, or a credential of the wrong kind.",
        404: "Not found.",
        409: "Conflict with the current state.",
        413: "Request body over 1 MiB.",
        429: "Rate limited; see `Retry-After`.",
        501: "Not offered by a self-hosted Parley; the message says what to use instead.",
        502: "A service called on the caller's behalf (the carrier) failed; the message says how.",
        503: "A dependency is unavailable.",
    }
    return {s: {"model": ErrorOut, "description": descriptions[s]} for s in statuses}


# --- JWT configuration ------------------------------------------------------------------

Issuer = Annotated[Label, StringConstraints(min_length=1, max_length=512)]


class JwtConfigPut(Input):
    """`PUT /v1/auth/jwt`: exactly one of `jwks_url` and `public_keys`."""

    issuers: Annotated[list[Issuer], Field(min_length=1, max_length=10)]
    audience: Annotated[Label, StringConstraints(min_length=1, max_length=512)] | None = None
    jwks_url: Annotated[Label, StringConstraints(min_length=1, max_length=2048)] | None = None
    public_keys: (
        Annotated[
            list[JsonObject | Annotated[Text, StringConstraints(max_length=16_384)]],
            Field(min_length=1, max_length=20),
        ]
        | None
    ) = Field(default=None, description="JWK objects or PEM strings.")
    require_jti: bool = False


class JwtKeyOut(BaseModel):
    kid: str
    kty: str
    alg: str
    source: Literal["jwks", "static"]


class JwtConfigOut(BaseModel):
    issuers: list[str]
    audience: str
    jwks_url: str | None
    public_keys: list[dict[str, str]]
    keys: list[JwtKeyOut]
    jwks_fetched_at: Timestamp | None
    jwks_error: str | None
    require_jti: bool


class JwtCheckIn(Input):
    """`POST /v1/auth/jwt/check`: a token to explain, never recorded or echoed."""

    token: Annotated[str, StringConstraints(min_length=1, max_length=65_536)]
    conversation_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        default=None, description="The conversation the token would access (step 9)."
    )


class JwtCheckStepOut(BaseModel):
    step: int = Field(description="The step of API.md section 7, 1..11.")
    check: str
    status: Literal["passed", "failed", "skipped", "not_run"]
    code: str | None = Field(description="The error code a real request would get.")
    reason: str = Field(description="What was found, in plain words.")


class JwtCheckOut(BaseModel):
    valid: bool = Field(description="True when no step failed.")
    failed_step: int | None
    code: str | None = Field(description="The code of the failed step, if any.")
    steps: list[JwtCheckStepOut]


# --- conversations ----------------------------------------------------------------------


class ConversationCreate(Input):
    agent: Annotated[Label, StringConstraints(min_length=1, max_length=64)]
    project: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None
    id: Annotated[Label, StringConstraints(min_length=1, max_length=128)] | None = None


class AgentRefOut(BaseModel):
    id: str
    name: str


class ToolRefOut(BaseModel):
    id: str
    name: str


class ToolCallOut(BaseModel):
    """A tool call as stored on its turn's item (API.md section 12)."""

    id: str
    tool: ToolRefOut
    parameters: Any
    output: Any
    endpoint_url: str | None
    response_status_code: int | None
    duration_ms: int | None
    timed_out: bool
    error_message: str | None


class ConversationItemOut(BaseModel):
    """An item (API.md section 5), with the official SDK's `ConversationItem` members."""

    id: str = Field(description="`item_…`: stable, for `POST /v1/conversation_items/{id}/replay`.")
    item_idx: int = Field(description="Its place in the conversation, from 0.")
    role: Literal["user", "assistant"]
    text: str
    live_transcript: str = Field(description="The SDK's name of `text`.")
    post_call_transcript: None = Field(description="Always null: no second transcription.")
    duration_ms: int = Field(description="0: Parley does not measure an item's duration.")
    started_at: Timestamp = Field(description="The SDK's name of `created_at`.")
    created_at: Timestamp
    tool_calls: list[ToolCallOut]


class ConversationAgentOut(BaseModel):
    id: str
    name: str
    is_deleted: bool = Field(description="Always false: a deleted agent's conversations show null.")


class CallInfoOut(BaseModel):
    from_phone_number: str | None
    to_phone_number: str | None
    twilio_call_sid: str | None
    direction: Literal["inbound", "outbound", "test"]


class TurnTimingOut(BaseModel):
    """One reply's stages in milliseconds (API.md section 18)."""

    item_id: str | None = Field(description="The reply's assistant item (null: not stored).")
    endpointing_ms: int = Field(description="End of speech to the end-of-turn decision.")
    transcription_ms: int = Field(description="That decision to the final words.")
    model_first_token_ms: int = Field(description="The final words to the model's first token.")
    speech_first_audio_ms: int = Field(description="The first sentence to its first audio.")
    total_ms: int = Field(description="End of speech to the first audio sent: `latencies_ms`.")
    played_ms: int | None = Field(
        description="Calls: end of speech to the carrier's echo of the first audio; else null."
    )


class AnalysisOut(BaseModel):
    id: str = Field(description="The conversation's ID (the SDK's analysis ID).")
    latencies_ms: list[int]
    interruptions_count: int
    turns: list[TurnTimingOut]


EndedBy = Literal[
    "user",
    "assistant",
    "api",
    "timeout",
    "error",
    "shutdown",
    "busy",
    "no_answer",
    "failed",
    "voicemail",
    "transferred",
    "assistant_silence_limit_reached",
    "configuration_endpoint_timed_out",
    "configuration_endpoint_error",
    "configuration_endpoint_invalid_response",
]
"""API.md sections 5 and 15: `records.EndedBy`'s values (tests/test_endings_home.py)."""


class DeletionInfoOut(BaseModel):
    """When the transcript and the recording were deleted (API.md section 16); null: kept."""

    transcripts_deleted_at: Timestamp | None
    audio_recordings_deleted_at: Timestamp | None


class ConversationOut(BaseModel):
    id: str
    agent: ConversationAgentOut | None
    project: ProjectRefOut | None
    status: Literal["pending", "live", "ended"]
    end_user: str | None
    external_id: str | None
    started_at: Timestamp | None
    ended_at: Timestamp | None
    ended_by: EndedBy | None
    duration_ms: int | None
    call_info: CallInfoOut | None
    template_variables: dict[str, str]
    analysis: AnalysisOut
    audio_url: str | None
    """The recording, by a URL valid for an hour (API.md section 16); null until it is kept."""
    deletion_info: DeletionInfoOut
    summary: str | None
    """A few sentences by the language model (API.md section 16); null until written."""
    is_redacted: bool
    """It ran with `enable_redaction` (API.md section 16)."""
    heard_languages: list[str] = Field(
        description="The languages heard from the user, in the order first heard."
    )
    created_at: Timestamp
    # The official SDK's `Conversation` members (API.md section 17), each saying what Parley
    # does: services/event_payloads.py `sdk_members` is their one home.
    workspace: str = Field(description="The organization's name.")
    origin: Literal["direct", "inbound", "outbound", "replay", "test"]
    model: Literal["parley"]
    generate_welcome_message: bool
    is_welcome_message_interruptible: bool
    listen_only: bool
    input_format: str
    output_format: str
    background_noise_level: float
    pronunciation_dictionary: list[dict[str, str]]
    min_words_to_interrupt: int
    default_language: str
    additional_languages: list[str]
    multilingual_mode: Literal["auto", "initial", "request"]
    push_to_talk: bool
    task_results: dict[str, Any]
    replay_of: str | None = Field(description="The conversation it replays (`origin` replay).")
    items: list[ConversationItemOut]


class ConversationEnvelope(BaseModel):
    conversation: ConversationOut


class PaginationOut(BaseModel):
    prev_cursor: str | None = Field(description="A conversation ID: pass it as `before`.")
    next_cursor: str | None = Field(description="A conversation ID: pass it as `after`.")


class ConversationList(BaseModel):
    conversations: list[ConversationOut]
    next_cursor: str | None = Field(description="Pass it as `cursor` (API.md section 5).")
    pagination: PaginationOut = Field(description="The official SDK's cursors (section 17).")


# --- session tokens ---------------------------------------------------------------------


class SessionTokenCreate(Input):
    ttl_seconds: Annotated[int, Field(ge=60, le=3600)] = 300
    conversation_ids: (
        Annotated[
            list[Annotated[Label, StringConstraints(min_length=1, max_length=128)]],
            Field(max_length=100),
        ]
        | None
    ) = None


class SessionTokenCreated(BaseModel):
    id: str
    session_token: str = Field(description="The token itself: shown once, never again.")
    expires_at: Timestamp


# --- conversation tokens (API.md section 17) ----------------------------------------------


class ConversationTokenCreate(Input):
    agent_id: Annotated[Label, StringConstraints(min_length=1, max_length=64)]
    ttl_seconds: int = Field(default=30, description="30 to 60 seconds.")


class ConversationTokenCreated(BaseModel):
    conversation_token: str = Field(description="Single-use; shown once, never again.")
    expires_at: Timestamp


# --- audit trail ------------------------------------------------------------------------


class AuditActorOut(BaseModel):
    kind: str = Field(
        description="`api_key`, `session_token`, `jwt`, `dashboard` (id: the API key that "
        "opened the session), `operator` (the CLI) or `system`."
    )
    id: str | None


class AuditEventOut(BaseModel):
    seq: int = Field(description="Position in the organization's chain, from 1.")
    action: str = Field(examples=["agent.disable"])
    target: str = Field(description="The ID of what changed (`jwt_settings` for JWT settings).")
    actor: AuditActorOut
    client: str | None = Field(description="The client's IP address.")
    request_id: str | None
    details: dict[str, Any]
    created_at: Timestamp
    prev_hash: str = Field(description="`hash` of the event before (64 zeros for the first).")
    hash: str = Field(description="SHA-256 of prev_hash and the event's canonical JSON.")

    @classmethod
    def of(cls, event: AuditEvent) -> AuditEventOut:
        return cls(
            seq=event.seq,
            action=event.action,
            target=event.target,
            actor=AuditActorOut(kind=event.actor_kind, id=event.actor_id),
            client=event.client,
            request_id=event.request_id,
            details=event.details,
            created_at=isoformat(event.created_at),
            prev_hash=event.prev_hash,
            hash=event.hash,
        )


class AuditEventList(BaseModel):
    audit_events: list[AuditEventOut]
    next_cursor: str | None
