"""The official SDK's agent members (API.md section 17) on the wire: the delivery members
Parley honours (services/delivery.py), with their rules, and the members it does not have,
each refused with 400 `validation_error` naming it, "is not supported".

Mixins of `AgentCreate`, `AgentUpdate` and `AgentUpsert` (api/schemas.py), strict as every
input is. The members of other parts (`configuration_endpoint`, the languages of API.md
section 18, `built_in_tool_configs`) are not listed here: they keep their own answers. The
SDK's deprecated `languages` is refused: `default_language` and `additional_languages` say
it (services/languages.py).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, create_model
from pydantic.json_schema import SkipJsonSchema

from parley.records import Delivery, DeliveryPatch, PronunciationEntry
from parley.services import delivery as rules
from parley.text import Text

NOT_SUPPORTED = "is not supported: Parley does not have this feature"

UNSUPPORTED_AGENT_MEMBERS = (
    "additional_voice_ids",
    "assistant_backchannel_aggressiveness",
    "background_noise",
    "background_noise_level",
    "custom_phone_number",
    "custom_phone_numbers",
    "enable_assistant_backchannel",
    "enable_watermarking",
    "generate_no_input_poke_text",
    "inbound_rollout",
    "inbound_rollout_forward_phone_number",
    "integrations",
    "intelligence_level",
    "languages",
    "listen_only_inbound_enabled",
    "listen_only_inbound_message",
    "mcp_server_ids",
    "observability_integrations",
    "outbound_number_pool",
    "phone_number",
    "phonic_model",
    "procedure_ids",
    "push_to_talk",
    "slug",
    "tasks",
    "vad_min_speech_duration_ms",
    "vad_prebuffer_duration_ms",
    "websocket_timeout_sec",
)
"""Members of the SDK's `agents.create`, `update` and `upsert` that Parley does not have."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _refuse(_value: Any) -> Any:
    raise ValueError(NOT_SUPPORTED)


# Any value, null too, is refused: the SDK sends only the members a caller names.
_Unsupported = SkipJsonSchema[Annotated[Any, AfterValidator(_refuse)]]

UnsupportedAgentMembers: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "UnsupportedAgentMembers",
    __base__=_Strict,
    **dict.fromkeys(UNSUPPORTED_AGENT_MEMBERS, (_Unsupported, None)),
)
"""A mixin whose every member is refused, left out of the OpenAPI schema."""


def _timezone(value: str) -> str:
    if not rules.is_timezone(value):
        raise ValueError(rules.TIMEZONE_RULE)
    return value


def _distinct_words(entries: list[PronunciationIn]) -> list[PronunciationIn]:
    word = rules.repeated_word(tuple(entry.record() for entry in entries))
    if word is not None:
        raise ValueError(f"lists the word {word!r} twice")
    return entries


AudioSpeed = Annotated[
    float,
    Field(
        ge=rules.AUDIO_SPEED_RANGE[0],
        le=rules.AUDIO_SPEED_RANGE[1],
        description="The voice's pace: 1.0 its own, 2.0 twice as fast.",
    ),
]
TimeZone = Annotated[
    str,
    AfterValidator(_timezone),
    Field(
        description="IANA time zone; the model is told the local time there.",
        examples=["Europe/Berlin"],
    ),
]
VadMinSilence = Annotated[
    int,
    Field(
        ge=rules.VAD_MIN_SILENCE_MS_RANGE[0],
        le=rules.VAD_MIN_SILENCE_MS_RANGE[1],
        description="The silence (ms) that ends the user's turn; null: the server's.",
    ),
]
VadThreshold = Annotated[
    float,
    Field(
        ge=rules.VAD_THRESHOLD_RANGE[0],
        le=rules.VAD_THRESHOLD_RANGE[1],
        description="Speech probability at which the user starts speaking; null: 0.5.",
    ),
]


class PronunciationIn(_Strict):
    word: Annotated[Text, StringConstraints(min_length=1, max_length=rules.MAX_WORD)]
    pronunciation: Annotated[
        Text, StringConstraints(min_length=1, max_length=rules.MAX_PRONUNCIATION)
    ]

    def record(self) -> PronunciationEntry:
        return PronunciationEntry(self.word, self.pronunciation)


PronunciationDictionary = Annotated[
    list[PronunciationIn],
    Field(max_length=rules.MAX_PRONUNCIATIONS),
    AfterValidator(_distinct_words),
]


def _entries(given: list[PronunciationIn]) -> tuple[PronunciationEntry, ...]:
    return tuple(entry.record() for entry in given)


class DeliveryIn(_Strict):
    """The delivery of a new (or replaced) agent: members not given take their defaults."""

    generate_welcome_message: bool = Field(
        default=False, description="The model writes the welcome; `welcome_message` unused."
    )
    is_welcome_message_interruptible: bool = Field(
        default=True, description="False: the user's speech does not cut the welcome."
    )
    audio_speed: AudioSpeed = 1.0
    timezone: TimeZone | None = None
    pronunciation_dictionary: PronunciationDictionary = Field(
        default_factory=list,
        description="`{word, pronunciation}`: the word is spoken as its pronunciation.",
    )
    vad_min_silence_duration_ms: VadMinSilence | None = None
    vad_threshold: VadThreshold | None = None

    def delivery(self) -> Delivery:
        """The record of these members."""
        return Delivery(
            generate_welcome_message=self.generate_welcome_message,
            is_welcome_message_interruptible=self.is_welcome_message_interruptible,
            audio_speed=self.audio_speed,
            timezone=self.timezone,
            pronunciation_dictionary=_entries(self.pronunciation_dictionary),
            vad_min_silence_duration_ms=self.vad_min_silence_duration_ms,
            vad_threshold=self.vad_threshold,
        )


class DeliveryUpdate(_Strict):
    """The delivery members a PATCH changes; `timezone` and the VAD members take null (the
    default again), the others may not be null."""

    generate_welcome_message: bool | None = None
    is_welcome_message_interruptible: bool | None = None
    audio_speed: AudioSpeed | None = None
    timezone: TimeZone | None = None
    pronunciation_dictionary: PronunciationDictionary | None = None
    vad_min_silence_duration_ms: VadMinSilence | None = None
    vad_threshold: VadThreshold | None = None

    NULLABLE_DELIVERY: ClassVar[frozenset[str]] = frozenset(
        {"timezone", "vad_min_silence_duration_ms", "vad_threshold"}
    )

    def delivery_patch(self) -> DeliveryPatch:
        """The members sent, as a patch (the others UNSET)."""
        sent = self.model_fields_set
        given: dict[str, Any] = {
            name: getattr(self, name)
            for name in DeliveryUpdate.model_fields
            if name in sent and name != "pronunciation_dictionary"
        }
        entries = self.pronunciation_dictionary
        if "pronunciation_dictionary" in sent and entries is not None:
            given["pronunciation_dictionary"] = _entries(entries)
        return DeliveryPatch(**given)


class PronunciationOut(BaseModel):
    word: str
    pronunciation: str
