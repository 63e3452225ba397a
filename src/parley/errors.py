"""Parley's error tree: every failure the service can report, with a stable code.

    ParleyError
     ├── InvalidRequest ............ the request is malformed or breaks a rule of its own
     │    ├── ValidationFailed ....... fields fail validation (carries param_errors)
     │    ├── InvalidJson
     │    ├── InvalidCursor
     │    ├── MultipleCredentials
     │    ├── JwksUnreachable
     │    ├── UnknownTool, UndeclaredTemplateVariable, MissingTemplateVariable
     │    ├── UnknownExtractionSchema, UnknownEvalPrompt (an agent's lists, API.md 16)
     │    ├── WouldLockOut (an IP allowlist without its own caller, API.md 17)
     │    ├── NotAnAssistantItem (a replay of a user's item, API.md 17)
     ├── Unauthorized .............. no usable credential
     │    └── InvalidToken, InvalidSignature, InvalidAudience, TokenExpired,
     │        TokenNotYetValid (parley.jwt.errors)
     ├── Forbidden ................. the caller is known but may not do this
     │    ├── InsufficientScope
     │    ├── AgentNotAllowed (a conversation token's other agent, API.md section 17)
     │    ├── IpNotAllowed (the workspace's IP allowlist, API.md 17)
     │    ├── InvalidCarrierSignature, InvalidStreamToken (phone calls, API.md section 13)
     │    └── ConversationIdMismatch, IssuerNotRegistered (parley.jwt.errors)
     ├── NotFound
     │    └── AgentNotFound, ProjectNotFound, ApiKeyNotFound, ConversationNotFound
     │        (ConversationNotStarted), SessionTokenNotFound, ToolNotFound,
     │        TelephonyNotConfigured
     │        WebhookNotFound, DeliveryNotFound, StoragePolicyNotFound,
     │        ExtractionSchemaNotFound, EvalPromptNotFound, VoiceNotFound,
     │        ConversationItemNotFound, ScenarioNotFound, RunNotFound
     ├── Conflict .................. the request clashes with stored state
     │    └── NameTaken, AgentDisabled, PhoneNumberTaken, ProjectNotEmpty, ProjectProtected,
     │        ConversationExists, ConversationEnded, IssuerTaken, JtiReplayed, ToolInUse,
     │        AccountTaken, StoragePolicyInUse, SchemaInUse, NoLanguageModel, NoTranscript,
     │        NoRecording
     ├── PayloadTooLarge
     ├── RateLimited ............... carries retry_after (seconds)
     │    └── TooManyActiveConversations (a project's or workspace's cap, API.md 17)
     ├── UpstreamError ............. a service called on the caller's behalf refused or failed
     │    ├── CarrierError ........... the carrier's REST API (API.md section 15)
     │    ├── ConfigurationEndpointFailed: ...TimedOut, ...Error, ...InvalidResponse
     │    │                            (an agent's configuration endpoint, API.md 17)
     │    └── ExtractionFailed ....... the language model's answer, twice unusable (API.md 16)
     ├── NotOffered ................ needs what a self-hosted Parley does not have
     │    └── SipTrunkRequired ....... the SDK's SIP calls (no SIP trunk: API.md 17)
     └── Unavailable ............... a dependency is down; fails closed (Retry-After 2 s)
          └── JwksUnavailable

The kinds describe the domain, not HTTP: `parley.error_status` maps them to statuses by
walking each class's MRO. Each class carries a class-level `code` and default `message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar


class ParleyError(Exception):
    """Base of every error Parley reports to a caller."""

    code = "internal_error"
    message = "Internal server error."
    default_retry_after: ClassVar[int | None] = None
    """`Retry-After` (seconds) when the raiser gives none."""

    def __init__(
        self,
        message: str | None = None,
        *,
        param_errors: Mapping[str, str] | None = None,
        retry_after: int | None = None,
    ) -> None:
        self.message = message or type(self).message
        self.param_errors = dict(param_errors) if param_errors else None
        self.retry_after = retry_after if retry_after is not None else self.default_retry_after
        super().__init__(self.message)


# --- 400 ---------------------------------------------------------------------------


class InvalidRequest(ParleyError):
    code = "invalid_request"
    message = "The request is invalid."


class ValidationFailed(InvalidRequest):
    code = "validation_error"
    message = "Some fields are invalid."


class InvalidCursor(InvalidRequest):
    code = "invalid_cursor"
    message = "The cursor is not one this listing issued."


class InvalidJson(InvalidRequest):
    code = "invalid_json"
    message = "The request body is not valid JSON."


class MultipleCredentials(InvalidRequest):
    code = "multiple_credentials"
    message = "Send exactly one credential."


class JwksUnreachable(InvalidRequest):
    code = "jwks_unreachable"
    message = "The JWKS URL could not be fetched."


class UnknownTool(InvalidRequest):
    """A tool name that is neither a tool of the project nor a built-in (API.md 12)."""

    code = "unknown_tool"
    message = "Unknown tool."


class UndeclaredTemplateVariable(InvalidRequest):
    """A prompt or welcome message uses a `{{name}}` the agent does not declare."""

    code = "undeclared_template_variable"
    message = "The text uses a template variable the agent does not declare."


class MissingTemplateVariable(InvalidRequest):
    """A placeholder has neither a conversation value nor a declared default."""

    code = "missing_template_variable"
    message = "A template variable has neither a value nor a default."


class WouldLockOut(InvalidRequest):
    """An `ip_allowlist` that leaves out the address of the request setting it (API.md 17)."""

    code = "would_lock_out"
    message = "The IP allowlist would shut out the address making this request."


class UnknownExtractionSchema(InvalidRequest):
    """An agent's `extraction_schemas` names no extraction schema of its project."""

    code = "unknown_extraction_schema"
    message = "Unknown extraction schema."


class UnknownEvalPrompt(InvalidRequest):
    """An agent's `eval_prompts` names no evaluation prompt of its project."""

    code = "unknown_eval_prompt"
    message = "Unknown evaluation prompt."


class NotSupported(InvalidRequest):
    """A feature the official SDK names that Parley does not have (API.md sections 15, 17)."""

    code = "not_supported"
    message = "This is not supported."


class NotAnAssistantItem(InvalidRequest):
    """`conversation_items.replay` of an item the user said (API.md section 17)."""

    code = "not_an_assistant_item"
    message = "Only an assistant's item can be replayed: this one is the user's."


class NoPhoneNumber(InvalidRequest):
    """An outbound call's agent has no number to call from, or the number given is not one
    of its own (API.md section 15)."""

    code = "no_phone_number"
    message = "The agent has no phone number to call from."


# --- 401 ---------------------------------------------------------------------------


class Unauthorized(ParleyError):
    code = "unauthorized"
    message = "Missing or invalid credential."


# --- 403 ---------------------------------------------------------------------------


class Forbidden(ParleyError):
    code = "forbidden"
    message = "The resource belongs to a different organization."


class InsufficientScope(Forbidden):
    code = "insufficient_scope"
    message = "This credential may not perform this request."


class AgentNotAllowed(Forbidden):
    """A socket opened with a conversation token names another agent than the token's
    (API.md section 17): `forbidden`, and the socket closes (1008)."""

    message = "This conversation token opens a conversation with its own agent only."


class IpNotAllowed(Forbidden):
    """An API key or session token used from an address outside the workspace's
    `ip_allowlist` (API.md section 17)."""

    code = "ip_not_allowed"
    message = "This client address is not in the workspace's IP allowlist."


class InvalidCarrierSignature(Forbidden):
    """A carrier webhook whose `X-Twilio-Signature` is missing or wrong, or whose account is
    unknown: one answer for all, no hint which (API.md section 13). It shares its code with
    a JWT's bad signature (a 401), being the same failure of another credential."""

    code = "invalid_signature"
    message = "invalid signature"


class InvalidStreamToken(Forbidden):
    """A media stream's token is wrong, used, expired or for another conversation."""

    code = "invalid_stream_token"
    message = "The stream token is not valid for this conversation."


# --- 404 ---------------------------------------------------------------------------


class NotFound(ParleyError):
    code = "not_found"
    message = "Not found."


class AgentNotFound(NotFound):
    code = "agent_not_found"
    message = "Agent not found."


class ProjectNotFound(NotFound):
    code = "project_not_found"
    message = "Project not found."


class ApiKeyNotFound(NotFound):
    code = "api_key_not_found"
    message = "API key not found."


class ConversationNotFound(NotFound):
    code = "conversation_not_found"
    message = "Conversation not found."


class ConversationItemNotFound(NotFound):
    code = "conversation_item_not_found"
    message = "Conversation item not found."


class ConversationNotStarted(ConversationNotFound):
    """A JWT names a conversation that its first WebSocket has not created yet."""

    message = (
        "Conversation not found: a conversation named by a JWT is created by the first "
        "WebSocket connection that uses a token for it (GET /v1/sts/ws?jwt=...). This "
        "request has spent the token's jti: mint a new token for the WebSocket."
    )


class SessionTokenNotFound(NotFound):
    code = "session_token_not_found"
    message = "Session token not found."


class ToolNotFound(NotFound):
    code = "tool_not_found"
    message = "Tool not found."


class WebhookNotFound(NotFound):
    code = "webhook_not_found"
    message = "Webhook not found."


class DeliveryNotFound(NotFound):
    code = "delivery_not_found"
    message = "Delivery not found."


class StoragePolicyNotFound(NotFound):
    code = "external_storage_policy_not_found"
    message = "External storage policy not found."


class ExtractionSchemaNotFound(NotFound):
    code = "extraction_schema_not_found"
    message = "Extraction schema not found."


class EvalPromptNotFound(NotFound):
    code = "eval_prompt_not_found"
    message = "Evaluation prompt not found."


class ScenarioNotFound(NotFound):
    code = "test_scenario_not_found"
    message = "Test scenario not found."


class RunNotFound(NotFound):
    code = "test_run_not_found"
    message = "Test run not found."


class OrganizationNotFound(NotFound):
    code = "organization_not_found"
    message = "Organization not found."


class TelephonyNotConfigured(NotFound):
    code = "telephony_not_configured"
    message = "No carrier account is set for this organization."


class VoiceNotFound(NotFound):
    code = "voice_not_found"
    message = "Voice not found: GET /v1/voices lists the installed voices."


# --- 409 ---------------------------------------------------------------------------


class Conflict(ParleyError):
    code = "conflict"
    message = "The request conflicts with the current state."


class NameTaken(Conflict):
    code = "name_taken"
    message = "The name is already taken."


class AgentDisabled(Conflict):
    code = "agent_disabled"
    message = "The agent is disabled."


class PhoneNumberTaken(Conflict):
    code = "phone_number_taken"
    message = "The phone number belongs to another agent."


class ProjectNotEmpty(Conflict):
    code = "project_not_empty"
    message = "The project still has agents."


class ProjectProtected(Conflict):
    code = "project_protected"
    message = "The main project cannot be deleted."


class ConversationExists(Conflict):
    code = "conversation_exists"
    message = "A conversation with this ID already exists."


class ConversationLive(Conflict):
    code = "conversation_live"
    message = "The conversation has not ended: end it first."


class ConversationEnded(Conflict):
    code = "conversation_ended"
    message = "The conversation has ended."


class IssuerTaken(Conflict):
    code = "issuer_taken"
    message = "The issuer is registered by another organization."


class ToolInUse(Conflict):
    code = "tool_in_use"
    message = "An agent lists this tool: remove it from the agent first."


class StoragePolicyInUse(Conflict):
    """An external storage policy that an agent names cannot be deleted (API.md 16)."""

    code = "policy_in_use"
    message = "An agent names this external storage policy: change the agent first."


class SchemaInUse(Conflict):
    code = "schema_in_use"
    message = "An agent lists this extraction schema: remove it from the agent first."


class NoLanguageModel(Conflict):
    """Summaries, extractions and evaluations need the language model (PARLEY_LLM_*)."""

    code = "no_language_model"
    message = "No language model is configured on this server (PARLEY_LLM_BASE_URL)."


class NoTranscript(Conflict):
    """An extraction or evaluation of a conversation whose words are not kept."""

    code = "no_transcript"
    message = (
        "The conversation keeps no transcript (deleted, or zero data retention): there is "
        "nothing to read."
    )


class NoRecording(Conflict):
    """`conversations.replay` of a conversation without a recording (API.md section 17)."""

    code = "no_recording"
    message = "The conversation has no recording to replay (not recorded, or deleted)."


class AccountTaken(Conflict):
    code = "account_taken"
    message = "The carrier account is set by another organization."


class CallsNotConfigured(Conflict):
    """An outbound call asked of an organization with no carrier account (API.md section
    15: 409, where reading the account that is not there is section 13's 404)."""

    code = "telephony_not_configured"
    message = "No carrier account is set for this organization: set one to place calls."


# --- 413, 429, 502, 503 ------------------------------------------------------------


class PayloadTooLarge(ParleyError):
    code = "payload_too_large"
    message = "The request body is larger than 1 MiB."


class RateLimited(ParleyError):
    code = "rate_limited"
    message = "Too many requests."


class TooManyActiveConversations(RateLimited):
    """A conversation would start past its project's or workspace's
    `max_active_conversations` (API.md section 17)."""

    code = "too_many_active_conversations"
    message = "Too many active conversations: the cap is reached."
    default_retry_after = 5


class UpstreamError(ParleyError):
    """A service called on the caller's behalf (not one of Parley's own dependencies)
    refused the request or failed to answer it; the message says what it said."""

    code = "upstream_error"
    message = "A service called on the caller's behalf failed."


class CarrierError(UpstreamError):
    """The carrier's REST API refused a call or an update, or did not answer in time
    (API.md section 15); the message passes on the carrier's own, never a credential.

    `status` is the carrier's HTTP status (None: no answer) and `carrier_code` its error
    code (Twilio's numeric `code`, None when it gave none), for callers that tell a refusal
    from another (e.g. an update of a call that has ended).
    """

    code = "carrier_error"
    message = "The carrier's API failed."

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int | None = None,
        carrier_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.carrier_code = carrier_code


class ConfigurationEndpointFailed(UpstreamError):
    """An agent's configuration endpoint failed at a conversation's start (API.md section
    17): the conversation ends before it starts, with the subclass's code as `ended_by`."""

    code = "configuration_endpoint_failed"
    message = "The agent's configuration endpoint failed."


class ConfigurationEndpointTimedOut(ConfigurationEndpointFailed):
    code = "configuration_endpoint_timed_out"
    message = "The agent's configuration endpoint did not answer in time."


class ConfigurationEndpointError(ConfigurationEndpointFailed):
    code = "configuration_endpoint_error"
    message = "The agent's configuration endpoint could not be called or answered an error."


class ConfigurationEndpointInvalidResponse(ConfigurationEndpointFailed):
    code = "configuration_endpoint_invalid_response"
    message = (
        "The agent's configuration endpoint answered something that is not a valid configuration."
    )


class ExtractionFailed(UpstreamError):
    """The language model's answer did not fit the schema, twice (API.md section 16)."""

    code = "extraction_failed"
    message = "The language model's answer did not fit the extraction schema, twice."


class NotOffered(ParleyError):
    """A call of the official SDK that needs something a self-hosted Parley does not have;
    the message says what, and what to use instead (API.md section 17)."""

    code = "not_offered"
    message = "This server does not offer this operation."


class SipTrunkRequired(NotOffered):
    """The SDK's custom (SIP) phone numbers and SIP outbound calls: Parley has no SIP trunk."""

    code = "not_supported"
    message = (
        "Parley has no SIP trunk: SIP phone numbers and SIP calls are not supported. Give the "
        "agent a Twilio number (PATCH /v1/agents/{nameOrId} with phone_numbers) and place "
        "calls with POST /v1/conversations/outbound_call."
    )


class Unavailable(ParleyError):
    code = "service_unavailable"
    message = "A dependency of the service is unavailable. Try again later."
    default_retry_after = 2


class JwksUnavailable(Unavailable):
    code = "jwks_unavailable"
    message = "The signing keys of the organization cannot be fetched. Try again later."


ERROR_KINDS: tuple[type[ParleyError], ...] = (
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    PayloadTooLarge,
    RateLimited,
    UpstreamError,
    NotOffered,
    Unavailable,
)
"""The base kinds; every concrete error descends from exactly one of them."""


def all_error_classes() -> list[type[ParleyError]]:
    """Return every subclass of ParleyError that is defined so far (for tests and docs)."""
    found: list[type[ParleyError]] = []
    stack: list[type[ParleyError]] = [ParleyError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found
