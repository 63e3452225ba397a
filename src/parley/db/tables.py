"""Table rows: the storage layout, free to change behind the repositories."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Timestamp(TypeDecorator[datetime]):
    """An aware UTC datetime on every database (SQLite keeps no zone of its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, _dialect: Dialect) -> datetime | None:
        if not isinstance(value, datetime):
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: Timestamp}


class OrganizationRow(Base):
    __tablename__ = "organizations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column()
    # The workspace's settings (API.md section 17).
    max_active_conversations: Mapped[int | None] = mapped_column()
    ip_allowlist: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    invite_link_allowed_domains: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    logo_url: Mapped[str | None] = mapped_column(String(2048))


class ApiKeyRow(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str | None] = mapped_column(String(100))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    last4: Mapped[str] = mapped_column(String(4))
    created_at: Mapped[datetime] = mapped_column()
    revoked_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (Index("ix_api_keys_org_id_created_at", "org_id", "created_at"),)


class ApiKeyGraceSecretRow(Base):
    """A secret a rotation replaced, still working until `valid_until` (API.md section 17),
    stored as the SHA-256 of the secret like the key's own."""

    __tablename__ = "api_key_grace_secrets"

    secret_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    last4: Mapped[str] = mapped_column(String(4))
    valid_until: Mapped[datetime] = mapped_column(index=True)
    created_at: Mapped[datetime] = mapped_column()


class ProjectRow(Base):
    __tablename__ = "projects"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column()
    # API.md section 17; no foreign key: a deleted agent reads as no default (migration 0021).
    default_agent_id: Mapped[str | None] = mapped_column(String(40))
    max_active_conversations: Mapped[int | None] = mapped_column()

    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_projects_org_id_name"),)


class AgentRow(Base):
    __tablename__ = "agents"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="RESTRICT"))
    name: Mapped[str] = mapped_column(String(64))
    voice_id: Mapped[str] = mapped_column(String(100))
    system_prompt: Mapped[str] = mapped_column(Text)
    welcome_message: Mapped[str | None] = mapped_column(Text)
    language: Mapped[str] = mapped_column(String(16))
    audio_format: Mapped[str] = mapped_column(String(16))
    tools: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    """Tool names, in order: tools of the agent's project and built-ins (API.md section 12)."""
    template_variables: Mapped[dict[str, dict[str, str]]] = mapped_column(JSON, server_default="{}")
    """Placeholder name -> `{"default_value": str}`."""
    boosted_keywords: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    no_input_poke_sec: Mapped[int | None] = mapped_column(Integer)
    no_input_poke_text: Mapped[str] = mapped_column(Text, server_default="Are you still there?")
    no_input_end_conversation_sec: Mapped[int | None] = mapped_column(Integer)
    voicemail_message: Mapped[str | None] = mapped_column(Text)
    """Spoken to an answering machine on an outbound call (API.md section 15)."""
    data_retention_policy: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """`RetentionPolicy.to_json()` (API.md section 16); None: everything kept."""
    extraction_schemas: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    """Names of extraction schemas of the agent's project, run after each call (API.md 16)."""
    eval_prompts: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    """Names of evaluation prompts of the agent's project, run after each call (API.md 16)."""
    external_storage_policy_id: Mapped[str | None] = mapped_column(String(40), index=True)
    """The external storage policy its recordings go to (API.md section 16), by ID: a
    renamed policy stays the agent's. No foreign key (a plain ADD COLUMN on SQLite): the
    service locks the policy's row while an agent names it, and refuses to delete a policy
    that an agent names."""
    enable_redaction: Mapped[bool] = mapped_column(Boolean, server_default=false())
    """Its conversations keep personal data only as tags (API.md section 16)."""
    configuration_endpoint: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """`{"url", "headers": {name: sealed value}, "timeout_ms", "secret": sealed}` (API.md
    section 17); None: no configuration endpoint."""
    delivery: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    additional_languages: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    """Languages it also hears and speaks (API.md section 18), in order."""
    multilingual_mode: Mapped[str | None] = mapped_column(String(16))
    """`auto`, `initial` or `request`; None: `auto` (services/languages.py)."""
    version: Mapped[int] = mapped_column(Integer, server_default=sql_text("1"))
    """1 at creation, one more at each update (the SDK's `version_number`)."""
    """`Delivery.to_json()` (API.md section 17); None: every member's default."""
    disabled_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_agents_project_id_name"),
        Index("ix_agents_org_id_created_at", "org_id", "created_at"),
    )


class PhoneNumberRow(Base):
    """A phone number belongs to at most one agent: the number is the primary key."""

    __tablename__ = "phone_numbers"

    number: Mapped[str] = mapped_column(String(16), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)


class ToolRow(Base):
    """A custom tool of a project (API.md section 12); its signing secret is stored sealed."""

    __tablename__ = "tools"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(String(40))
    """The longest, `built_in_transfer_to_phone_number`, is 33 characters."""
    execution_mode: Mapped[str] = mapped_column(String(8))
    parameters: Mapped[Any] = mapped_column(JSON)
    parameter_locations: Mapped[dict[str, str] | None] = mapped_column(JSON)
    endpoint_method: Mapped[str | None] = mapped_column(String(8))
    endpoint_url: Mapped[str | None] = mapped_column(String(2048))
    endpoint_headers: Mapped[dict[str, str] | None] = mapped_column(JSON)
    endpoint_timeout_ms: Mapped[int | None] = mapped_column(Integer)
    tool_call_output_timeout_ms: Mapped[int | None] = mapped_column(Integer)
    require_speech_before_tool_call: Mapped[bool] = mapped_column(Boolean)
    signing_secret_sealed: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()
    # A transfer tool's settings (API.md section 15); None for the other types.
    phone_number: Mapped[str | None] = mapped_column(String(16))
    dtmf: Mapped[str | None] = mapped_column(String(32))
    dynamic_dtmf: Mapped[bool | None] = mapped_column(Boolean)
    use_agent_phone_number: Mapped[bool | None] = mapped_column(Boolean)
    keep_listening: Mapped[bool | None] = mapped_column(Boolean)
    post_transfer_message: Mapped[str | None] = mapped_column(Text)
    on_transfer_no_answer: Mapped[str | None] = mapped_column(String(32))
    detect_voicemail: Mapped[bool | None] = mapped_column(Boolean)
    agents_to_transfer_to: Mapped[list[str] | None] = mapped_column(JSON)

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_tools_project_id_name"),
        Index("ix_tools_org_id_created_at", "org_id", "created_at"),
    )


class StoragePolicyRow(Base):
    """An external storage policy of a project (API.md section 16): an S3-compatible bucket.
    Both credentials are stored sealed."""

    __tablename__ = "external_storage_policies"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    endpoint_url: Mapped[str] = mapped_column(String(2048))
    bucket: Mapped[str] = mapped_column(String(63))
    region: Mapped[str | None] = mapped_column(String(64))
    key_prefix: Mapped[str | None] = mapped_column(String(512))
    addressing_style: Mapped[str] = mapped_column(String(8))
    access_key_id_sealed: Mapped[str] = mapped_column(Text)
    secret_access_key_sealed: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_external_storage_policies_project_id_name"),
        Index("ix_external_storage_policies_org_id_created_at", "org_id", "created_at"),
    )


class JwtConfigRow(Base):
    """An organization's JWT settings and the last good copy of its JWKS (API.md section 7)."""

    __tablename__ = "jwt_configs"

    org_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    audience: Mapped[str] = mapped_column(String(512))
    jwks_url: Mapped[str | None] = mapped_column(String(2048))
    static_keys: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    require_jti: Mapped[bool] = mapped_column(Boolean)
    jwks_document: Mapped[dict[str, object] | None] = mapped_column(JSON)
    jwks_document_url: Mapped[str | None] = mapped_column(String(2048))
    jwks_fetched_at: Mapped[float | None] = mapped_column(Double)
    jwks_max_age: Mapped[int | None] = mapped_column(Integer)
    jwks_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column()


class JwtIssuerRow(Base):
    """A registered `iss`: the primary key makes an issuer belong to one organization."""

    __tablename__ = "jwt_issuers"

    issuer: Mapped[str] = mapped_column(String(512), primary_key=True)
    org_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )


class ConversationRow(Base):
    """A conversation; its ID is unique within the organization (API.md section 5)."""

    __tablename__ = "conversations"

    org_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent_id: Mapped[str | None] = mapped_column(ForeignKey("agents.id", ondelete="SET NULL"))
    project_id: Mapped[str | None] = mapped_column(String(40))
    """No foreign key: a conversation outlives its project and keeps naming it."""
    project_name: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    end_user: Mapped[str | None] = mapped_column(String(256))
    external_id: Mapped[str | None] = mapped_column(String(256))
    started_at: Mapped[datetime | None] = mapped_column()
    ended_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column()
    instance_id: Mapped[str | None] = mapped_column(String(128))
    """The instance serving the conversation while it is `live` (its lease holder)."""
    template_variables: Mapped[dict[str, str]] = mapped_column(JSON, server_default="{}")
    """The template values the conversation used (API.md section 12)."""
    from_phone_number: Mapped[str | None] = mapped_column(String(64))
    """A phone call's caller, as the carrier gave it (API.md section 13's `call_info`)."""
    to_phone_number: Mapped[str | None] = mapped_column(String(64))
    twilio_call_sid: Mapped[str | None] = mapped_column(String(64))
    ended_by: Mapped[str | None] = mapped_column(String(40))
    """user, assistant, api, timeout, error or shutdown (API.md section 5)."""
    latencies_ms: Mapped[list[int]] = mapped_column(JSON, server_default="[]")
    """Per reply to a user turn: end of the user's speech to the reply's first audio."""
    interruptions_count: Mapped[int] = mapped_column(Integer, server_default="0")
    turn_timings: Mapped[list[dict[str, Any]]] = mapped_column(JSON, server_default="[]")
    """Per reply to a spoken user turn, its stages' timings (`records.TurnTiming`)."""
    call_direction: Mapped[str | None] = mapped_column(String(16))
    """`inbound` or `outbound` for a phone call (API.md section 15); None off the phone."""
    call_settings: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """An outbound call's `config` overrides of its agent's settings, as placed."""
    answered_by: Mapped[str | None] = mapped_column(String(32))
    """The carrier's answering-machine verdict of an outbound call (`AnsweredBy`)."""
    transfer: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """A phone transfer under way (services/transfers.py): where, how, which attempt."""
    transfer_since: Mapped[datetime | None] = mapped_column()
    """When the transfer's state last changed: a stuck one is ended by the timer."""
    recording_key: Mapped[str | None] = mapped_column(String(300))
    """Where the recording is kept (services/recordings.py); None until it is stored."""
    recorded_at: Mapped[datetime | None] = mapped_column()
    recording_policy_id: Mapped[str | None] = mapped_column(String(40))
    """The external storage policy the recording is kept by; None: the recordings directory."""
    transcripts_deleted_at: Mapped[datetime | None] = mapped_column()
    """When the item texts and tool call records were deleted (API.md section 16)."""
    audio_deleted_at: Mapped[datetime | None] = mapped_column()
    """When the recording was deleted (API.md section 16)."""
    retention: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """The retention policy in force when it went live (its agent's)."""
    redacted: Mapped[bool] = mapped_column(Boolean, server_default=false())
    """It went live with redaction on (its agent's `enable_redaction`, or its config's)."""
    transcripts_due_at: Mapped[datetime | None] = mapped_column()
    """When the transcript is to be deleted (set when it ends, by its policy)."""
    audio_due_at: Mapped[datetime | None] = mapped_column()
    summary: Mapped[str | None] = mapped_column(Text)
    """A few sentences by the language model (API.md section 16); None until written."""
    post_call_due_at: Mapped[datetime | None] = mapped_column(index=True)
    """When the work after the call is due (services/post_call.py); None once it is done."""
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    """Milliseconds from start to end, stored when it ends (the list's duration filters)."""
    replay_of: Mapped[str | None] = mapped_column(String(128))
    """The conversation whose recording it replays (`conversations.replay`); else None."""
    heard_languages: Mapped[list[str]] = mapped_column(JSON, server_default="[]")
    """The languages heard from the user (API.md section 18), in the order first heard."""
    test_run_id: Mapped[str | None] = mapped_column(String(40))
    """The test run whose caller held it (API.md section 19: its `origin` is `test`)."""
    tool_overrides: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """A test scenario's outputs answered in place of its webhook tools' endpoints."""

    __table_args__ = (
        Index("ix_conversations_org_id_created_at", "org_id", "created_at"),
        Index("ix_conversations_id", "id"),
        Index("ix_conversations_transcripts_due_at", "transcripts_due_at"),
        Index("ix_conversations_audio_due_at", "audio_due_at"),
        Index("ix_conversations_status_instance_id", "status", "instance_id"),
        Index("ix_conversations_org_id_external_id", "org_id", "external_id"),
        Index("ix_conversations_org_id_started_at", "org_id", "started_at"),
        Index("ix_conversations_org_id_duration_ms", "org_id", "duration_ms"),
    )


class TwilioAccountRow(Base):
    """An organization's carrier account (API.md section 13): one per organization, and an
    `account_sid` belongs to one organization. The auth token is stored sealed."""

    __tablename__ = "twilio_accounts"

    org_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    account_sid: Mapped[str] = mapped_column(String(34), unique=True)
    auth_token_sealed: Mapped[str] = mapped_column(Text)
    auth_token_last4: Mapped[str] = mapped_column(String(4))
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()


class BriefingRow(Base):
    """What a warm transfer's target hears before the bridge (API.md section 15): served
    once, at a URL naming a random token stored as its SHA-256."""

    __tablename__ = "briefings"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40))
    conversation_id: Mapped[str] = mapped_column(String(128))
    text: Mapped[str] = mapped_column(Text)
    voice_id: Mapped[str] = mapped_column(String(100))
    expires_at: Mapped[datetime] = mapped_column()
    used_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (
        ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
            name="fk_briefings_conversation",
        ),
        Index("ix_briefings_conversation", "org_id", "conversation_id"),
    )


class StreamTokenRow(Base):
    """A phone call's single-use media stream token, stored as its SHA-256 (API.md 13)."""

    __tablename__ = "stream_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40))
    conversation_id: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column()
    used_at: Mapped[datetime | None] = mapped_column()
    token_sealed: Mapped[str | None] = mapped_column(Text)
    """The token itself, sealed, so a repeat of its call's webhook gets it again; erased
    when the token is used (docs/decisions.md, "One answer per CallSid")."""

    __table_args__ = (
        ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
            name="fk_stream_tokens_conversation",
        ),
        Index("ix_stream_tokens_conversation", "org_id", "conversation_id"),
        Index("ix_stream_tokens_expires_at", "expires_at"),
    )


class TwilioCallRow(Base):
    """A call the voice webhook answered, by its `CallSid`: the replay guard (API.md 13).

    The primary key lets one request per call make its answer, on any instance; a repeat
    reads it. `conversation_id` is None for a rejected call. No foreign key to the
    conversation: a call stays answered after its conversation is deleted.
    """

    __tablename__ = "twilio_calls"

    org_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    call_sid: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str | None] = mapped_column(String(128))
    answered_at: Mapped[datetime] = mapped_column()


class ConversationItemRow(Base):
    """One utterance of a conversation, in order."""

    __tablename__ = "conversation_items"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org_id: Mapped[str] = mapped_column(String(40))
    conversation_id: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    tool_calls: Mapped[list[dict[str, Any]]] = mapped_column(JSON, server_default="[]")
    """The tool calls of the turn (API.md section 12's ToolCall, as JSON objects)."""
    created_at: Mapped[datetime] = mapped_column()
    item_id: Mapped[str | None] = mapped_column(String(40))
    """`item_…` (API.md section 17); every row has one (0024 gave the older ones theirs)."""

    __table_args__ = (
        ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
            name="fk_conversation_items_conversation",
        ),
        Index("ix_conversation_items_conversation", "org_id", "conversation_id", "id"),
        Index("ix_conversation_items_item_id", "item_id", unique=True),
    )


class SessionTokenRow(Base):
    """A session token, stored as the SHA-256 of its secret (API.md section 6)."""

    __tablename__ = "session_tokens"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    conversation_ids: Mapped[list[str] | None] = mapped_column(JSON)
    expires_at: Mapped[datetime] = mapped_column()
    created_at: Mapped[datetime] = mapped_column()
    revoked_at: Mapped[datetime | None] = mapped_column()


class ConversationTokenRow(Base):
    """A conversation token (API.md section 17): single-use, for one agent, stored as the
    SHA-256 of its secret; `used_at` is set by the one handshake that redeems it."""

    __tablename__ = "conversation_tokens"

    secret_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(index=True)
    used_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column()


class AuditEventRow(Base):
    """One event of an organization's audit trail: a link of its hash chain.

    No foreign key to the organization: the trail is evidence and outlives what it names.
    """

    __tablename__ = "audit_events"

    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(256))
    actor_kind: Mapped[str] = mapped_column(String(32))
    actor_id: Mapped[str | None] = mapped_column(String(256))
    client: Mapped[str | None] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(String(64))
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column()
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))

    __table_args__ = (
        Index("ix_audit_events_org_id_action", "org_id", "action"),
        Index("ix_audit_events_org_id_target", "org_id", "target"),
    )


class AuditHeadRow(Base):
    """The newest link of each organization's chain, so a deleted last event shows too."""

    __tablename__ = "audit_heads"

    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    hash: Mapped[str] = mapped_column(String(64))


class DashboardSessionRow(Base):
    """A dashboard sign-in, stored as the SHA-256 of the random session ID in the cookie."""

    __tablename__ = "dashboard_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    api_key_id: Mapped[str] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column()
    last_seen_at: Mapped[datetime] = mapped_column()
    expires_at: Mapped[datetime] = mapped_column()
    ended_at: Mapped[datetime | None] = mapped_column()


class InstanceRow(Base):
    """A running `parley serve` process: its heartbeat is the lease on its live conversations."""

    __tablename__ = "instances"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    started_at: Mapped[datetime] = mapped_column()
    heartbeat_at: Mapped[datetime] = mapped_column()


class JtiClaimRow(Base):
    """A used JWT `jti` (its digest), kept until `expires_at` (Unix seconds): embedded mode."""

    __tablename__ = "jti_claims"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    expires_at: Mapped[float] = mapped_column(Double, index=True)


class PendingRevocationRow(Base):
    """A revocation committed in the database but not yet published to the shared store."""

    __tablename__ = "pending_revocations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    credential_id: Mapped[str] = mapped_column(String(512))
    expires_at: Mapped[float] = mapped_column(Double)
    created_at: Mapped[datetime] = mapped_column()


class WebhookRow(Base):
    """An organization's webhook endpoint (API.md section 14); secrets sealed."""

    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    event_types: Mapped[list[str]] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(Text)
    secret_sealed: Mapped[str] = mapped_column(Text)
    previous_secret_sealed: Mapped[str | None] = mapped_column(Text)
    """The secret before the last rotation: it signs too until `previous_secret_expires_at`."""
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column()
    disabled_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()

    __table_args__ = (Index("ix_webhooks_org_id_created_at", "org_id", "created_at"),)


class WebhookDeliveryRow(Base):
    """The outbox: one event for one webhook, written in the transaction of the change."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    webhook_id: Mapped[str] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    org_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    """The JSON body sent on every attempt, exactly."""
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime | None] = mapped_column()
    last_attempt_at: Mapped[datetime | None] = mapped_column()
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    claimed_until: Mapped[datetime | None] = mapped_column()
    """The claimer's lease: past it, another worker may claim the row again."""
    created_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        Index("ix_webhook_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_webhook_id_created_at", "webhook_id", "created_at"),
    )


class JobRow(Base):
    """A periodic job that exactly one instance runs at a time (the retention sweep): the
    instance holding it until `lease_until` runs it; past that, any instance may take it."""

    __tablename__ = "jobs"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column()


class ExtractionSchemaRow(Base):
    """What to extract from a project's conversations (API.md section 16): a prompt and the
    typed fields of the answer."""

    __tablename__ = "extraction_schemas"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    prompt: Mapped[str] = mapped_column(Text)
    fields: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    """`[{"name", "type", "description"}]`, in order."""
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_extraction_schemas_project_id_name"),
        Index("ix_extraction_schemas_org_id_created_at", "org_id", "created_at"),
    )


class ConversationExtractionRow(Base):
    """One extraction's result. No foreign key to its schema: the result outlives it, and
    keeps the schema's ID and name as they were."""

    __tablename__ = "conversation_extractions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40))
    conversation_id: Mapped[str] = mapped_column(String(128))
    schema_id: Mapped[str] = mapped_column(String(40))
    schema_name: Mapped[str] = mapped_column(String(100))
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
            name="fk_conversation_extractions_conversation",
        ),
        Index(
            "ix_conversation_extractions_conversation", "org_id", "conversation_id", "created_at"
        ),
    )


class EvalPromptRow(Base):
    """What a project's conversations are judged against (API.md section 16)."""

    __tablename__ = "conversation_eval_prompts"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    prompt: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_conversation_eval_prompts_project_id_name"),
        Index("ix_conversation_eval_prompts_org_id_created_at", "org_id", "created_at"),
    )


class ConversationEvaluationRow(Base):
    """One evaluation's verdict; keeps its prompt's ID and name as they were."""

    __tablename__ = "conversation_evaluations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40))
    conversation_id: Mapped[str] = mapped_column(String(128))
    prompt_id: Mapped[str] = mapped_column(String(40))
    prompt_name: Mapped[str] = mapped_column(String(100))
    result: Mapped[str] = mapped_column(String(16))
    """successful, unsuccessful, undecided or error."""
    created_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
            name="fk_conversation_evaluations_conversation",
        ),
        Index(
            "ix_conversation_evaluations_conversation", "org_id", "conversation_id", "created_at"
        ),
        Index("ix_conversation_evaluations_prompt_id", "prompt_id"),
    )


class RecordingUploadRow(Base):
    """A recording waiting to be stored (services/recordings.py): the WAV itself, kept here
    until its store has it, so a store that is down or an instance that dies loses nothing.
    The instance that wrote it tries at once; after that, whichever instance's timer finds
    it due claims it by moving `next_attempt_at` past the claim's end."""

    __tablename__ = "recording_uploads"
    __table_args__ = (
        ForeignKeyConstraint(
            ["org_id", "conversation_id"],
            ["conversations.org_id", "conversations.id"],
            ondelete="CASCADE",
        ),
    )

    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    object_key: Mapped[str] = mapped_column(String(300))
    policy_id: Mapped[str | None] = mapped_column(String(40))
    """The external storage policy to store it by; None: the recordings directory."""
    data: Mapped[bytes] = mapped_column(LargeBinary)
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(index=True)
    last_error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column()


class ScenarioRow(Base):
    """A scripted or goal-driven caller and what it expects of an agent (API.md section 19)."""

    __tablename__ = "test_scenarios"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Everything but the name, as checked (services/test_scenarios.py)."""
    created_at: Mapped[datetime] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_test_scenarios_project_id_name"),
        Index("ix_test_scenarios_org_id_created_at", "org_id", "created_at"),
    )


class ScenarioRunRow(Base):
    """A run of scenarios, queued until an instance claims it (services/test_runs.py)."""

    __tablename__ = "test_runs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16))
    scenarios: Mapped[list[Any]] = mapped_column(JSON)
    """The scenarios' specs as they were when the run was made (name included)."""
    results: Mapped[list[Any]] = mapped_column(JSON)
    """One result per finished scenario, in the order they finished."""
    server_url: Mapped[str] = mapped_column(String(300))
    """Where the caller dials in: the address the run was asked for on."""
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    """The instance running it; its lease is the instance's (services/instances.py)."""
    created_at: Mapped[datetime] = mapped_column()
    started_at: Mapped[datetime | None] = mapped_column()
    ended_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (Index("ix_test_runs_status_created_at", "status", "created_at"),)
