"""Wire models of the tool resource (API.md section 12), beside api/schemas.py.

Types and sizes are checked here; the rules between fields (what a webhook tool needs, what
a WebSocket tool may not have, the two forms of `parameters`) are services/tools.py's.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, Field, StringConstraints

from parley.api.schemas import Input, PhoneNumber, ProjectRefOut, Timestamp
from parley.clock import isoformat
from parley.records import Tool, ToolPatch, ToolSpec
from parley.text import Label, Text

ToolType = Literal[
    "custom_webhook",
    "custom_websocket",
    "built_in_transfer_to_phone_number",
    "built_in_transfer_to_agent",
]
NoAnswer = Literal["return_to_assistant", "keep_retrying"]
Dtmf = Annotated[str, StringConstraints(pattern=r"^[0-9*#wW]{1,32}$")]
"""Keys Twilio's `sendDigits` plays: 0-9, * and #, and w for a half-second wait."""
AgentNames = Annotated[
    list[Annotated[Label, StringConstraints(min_length=1, max_length=64)]], Field(max_length=20)
]
ExecutionMode = Literal["sync", "async"]
EndpointMethod = Literal["POST", "GET"]
Location = Literal["request_body", "query_string", "url_path"]
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")


def _json_strings(value: Any) -> Any:
    """Every string of a JSON value (member names included) is storable text."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item or not _encodable(item):
                raise ValueError("must not contain NUL characters or unpaired surrogates")
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _headers(values: dict[str, str]) -> dict[str, str]:
    for name in values:
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an HTTP header name")
    return values


Parameters = Annotated[
    Any,
    AfterValidator(_json_strings),
    Field(description="A JSON Schema object, or the official SDK's flat list of parameters."),
]
Headers = Annotated[
    dict[str, Annotated[Label, StringConstraints(max_length=4096)]],
    Field(max_length=20),
    AfterValidator(_headers),
]
Description = Annotated[Text, StringConstraints(max_length=4096)]
ToolNameIn = Annotated[Label, StringConstraints(min_length=1, max_length=64)]
EndpointUrl = Annotated[Label, StringConstraints(min_length=1, max_length=2048)]
Locations = Annotated[dict[str, Location], Field(max_length=100)]


class ToolCreate(Input):
    name: ToolNameIn = Field(description="1-64 characters of a-z, 0-9 and _.")
    project: Annotated[Label, StringConstraints(max_length=64)] | None = Field(
        default=None, description="Project name or ID; default `main`."
    )
    description: Description = ""
    type: ToolType
    execution_mode: ExecutionMode = "sync"
    parameters: Parameters = Field(default_factory=list)
    parameter_locations: Locations | None = None
    endpoint_method: EndpointMethod | None = None
    endpoint_url: EndpointUrl | None = None
    endpoint_headers: Headers | None = None
    endpoint_timeout_ms: int | None = None
    tool_call_output_timeout_ms: int | None = None
    require_speech_before_tool_call: bool = False
    # Transfers (API.md section 15): the official SDK's members.
    phone_number: PhoneNumber | None = None
    dtmf: Dtmf | None = None
    dynamic_dtmf: bool | None = None
    use_agent_phone_number: bool | None = None
    keep_listening: bool | None = None
    post_transfer_message: Annotated[Text, StringConstraints(max_length=2_000)] | None = None
    on_transfer_no_answer: NoAnswer | None = None
    detect_voicemail: bool | None = None
    agents_to_transfer_to: AgentNames | None = None

    def spec(self) -> ToolSpec:
        values = self.model_dump(exclude={"project", "agents_to_transfer_to"})
        agents = self.agents_to_transfer_to
        return ToolSpec(
            **values, agents_to_transfer_to=tuple(agents) if agents is not None else None
        )


class ToolUpdate(Input):
    """A partial update: only the fields present change; null clears an optional field."""

    name: ToolNameIn | None = None
    description: Description | None = None
    type: ToolType | None = None
    execution_mode: ExecutionMode | None = None
    parameters: Parameters = None
    parameter_locations: Locations | None = None
    endpoint_method: EndpointMethod | None = None
    endpoint_url: EndpointUrl | None = None
    endpoint_headers: Headers | None = None
    endpoint_timeout_ms: int | None = None
    tool_call_output_timeout_ms: int | None = None
    require_speech_before_tool_call: bool | None = None
    phone_number: PhoneNumber | None = None
    dtmf: Dtmf | None = None
    dynamic_dtmf: bool | None = None
    use_agent_phone_number: bool | None = None
    keep_listening: bool | None = None
    post_transfer_message: Annotated[Text, StringConstraints(max_length=2_000)] | None = None
    on_transfer_no_answer: NoAnswer | None = None
    detect_voicemail: bool | None = None
    agents_to_transfer_to: AgentNames | None = None

    def patch(self) -> ToolPatch:
        """The fields sent (null included), as the service's patch."""
        sent: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        if sent.get("agents_to_transfer_to") is not None:
            sent["agents_to_transfer_to"] = tuple(sent["agents_to_transfer_to"])
        return ToolPatch(**sent)

    REQUIRED: ClassVar[frozenset[str]] = frozenset(
        {
            "name",
            "description",
            "type",
            "execution_mode",
            "parameters",
            "require_speech_before_tool_call",
        }
    )

    def null_fields(self) -> list[str]:
        """Return the fields sent as null that may not be null."""
        return sorted(
            name for name in self.model_fields_set & self.REQUIRED if getattr(self, name) is None
        )


class ToolCreated(BaseModel):
    id: str
    name: str
    signing_secret: str = Field(description="`whsec_…`: shown once, never again.")


class ToolOut(BaseModel):
    id: str
    name: str
    description: str
    project: ProjectRefOut
    type: ToolType
    execution_mode: ExecutionMode
    parameters: Any
    parameter_locations: dict[str, str] | None
    endpoint_method: EndpointMethod | None
    endpoint_url: str | None
    endpoint_headers: dict[str, str] | None
    endpoint_timeout_ms: int | None
    tool_call_output_timeout_ms: int | None
    require_speech_before_tool_call: bool
    phone_number: str | None = None
    dtmf: str | None = None
    dynamic_dtmf: bool | None = None
    use_agent_phone_number: bool | None = None
    keep_listening: bool | None = None
    post_transfer_message: str | None = None
    on_transfer_no_answer: NoAnswer | None = None
    detect_voicemail: bool | None = None
    agents_to_transfer_to: list[str] | None = None
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, tool: Tool) -> ToolOut:
        """The tool as API.md section 12 shows it: never its signing secret."""
        return cls.model_validate(
            {
                "id": tool.id,
                "name": tool.name,
                "description": tool.description,
                "project": ProjectRefOut.of(tool.project),
                "type": tool.type,
                "execution_mode": tool.execution_mode,
                "parameters": tool.parameters,
                "parameter_locations": _dict_or_none(tool.parameter_locations),
                "endpoint_method": tool.endpoint_method,
                "endpoint_url": tool.endpoint_url,
                "endpoint_headers": _dict_or_none(tool.endpoint_headers),
                "endpoint_timeout_ms": tool.endpoint_timeout_ms,
                "tool_call_output_timeout_ms": tool.tool_call_output_timeout_ms,
                "require_speech_before_tool_call": tool.require_speech_before_tool_call,
                **_transfer_members(tool),
                "created_at": isoformat(tool.created_at),
                "updated_at": isoformat(tool.updated_at),
            }
        )


class ToolEnvelope(BaseModel):
    tool: ToolOut


class ToolList(BaseModel):
    tools: list[ToolOut]
    next_cursor: str | None


def _dict_or_none(value: Any) -> dict[str, str] | None:
    return dict(value) if value is not None else None


TRANSFER_MEMBERS = (
    "phone_number",
    "dtmf",
    "dynamic_dtmf",
    "use_agent_phone_number",
    "keep_listening",
    "post_transfer_message",
    "on_transfer_no_answer",
    "detect_voicemail",
    "agents_to_transfer_to",
)
"""A transfer tool's members (the official SDK's `Tool`): null for the types they are not of."""


def _transfer_members(tool: Tool) -> dict[str, Any]:
    shown: dict[str, Any] = {name: getattr(tool, name) for name in TRANSFER_MEMBERS}
    if shown["agents_to_transfer_to"] is not None:
        shown["agents_to_transfer_to"] = list(shown["agents_to_transfer_to"])
    return shown
