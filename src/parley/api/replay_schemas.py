"""Wire models of the replays (API.md section 17): `conversation_items.replay`,
`responses.create` and `conversations.replay`, in the official SDK's shapes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import Input
from parley.services.alternatives import MAX_RESPONSES, Alternative
from parley.services.responses import (
    AssistantSaid,
    InlineDefinition,
    ProposedCallIn,
    ResponsesRequest,
    ToolOutput,
    UserSaid,
)
from parley.text import Label, Text

MAX_PROMPT = 100_000
MAX_ITEMS = 500
MAX_TEXT = 20_000

Prompt = Annotated[Text, StringConstraints(min_length=1, max_length=MAX_PROMPT)]
Said = Annotated[Text, StringConstraints(max_length=MAX_TEXT)]
CallId = Annotated[Label, StringConstraints(min_length=1, max_length=128)]
ToolName = Annotated[Label, StringConstraints(min_length=1, max_length=64)]
Responses = Annotated[int, Field(ge=1, le=MAX_RESPONSES)]


class ItemReplayIn(Input):
    """`POST /v1/conversation_items/{id}/replay`: every member optional (no body: the item's
    own system prompt, one response)."""

    system_prompt: Prompt | None = None
    num_responses: Responses | None = None


class ReplayToolOut(BaseModel):
    id: str
    name: str


class ReplayToolCallOut(BaseModel):
    """The SDK's `ReplayToolCall`: a call the model would make; nothing is called."""

    tool: ReplayToolOut
    endpoint_method: str | None
    endpoint_url: str | None
    endpoint_headers: None = Field(description="Always null: a tool's headers stay secret.")
    query_params: None
    context: None
    request_body: dict[str, Any] | None


class ReplayResponseOut(BaseModel):
    text: str
    tool_calls: list[ReplayToolCallOut]


class ItemReplayOut(BaseModel):
    """The SDK's `ReplayConversationItemResponse`."""

    responses: list[ReplayResponseOut]

    @classmethod
    def of(cls, found: list[Alternative]) -> ItemReplayOut:
        return cls(
            responses=[
                ReplayResponseOut(
                    text=one.text,
                    tool_calls=[
                        ReplayToolCallOut(
                            tool=ReplayToolOut(id=call.tool_id, name=call.name),
                            endpoint_method=call.endpoint_method,
                            endpoint_url=call.endpoint_url,
                            endpoint_headers=None,
                            query_params=None,
                            context=None,
                            request_body=call.request_body,
                        )
                        for call in one.calls
                    ],
                )
                for one in found
            ]
        )


# --- responses.create -------------------------------------------------------------------


class ToolReferenceIn(Input):
    id: Annotated[str, StringConstraints(max_length=128)] | None = None
    name: ToolName


class ToolCallIn(Input):
    tool_call_id: CallId
    tool: ToolReferenceIn
    request_body: dict[str, Any] | None = None
    query_params: dict[str, str | None] | None = None


class UserMessageIn(Input):
    role: Literal["user"]
    text: Said


class AssistantMessageIn(Input):
    role: Literal["assistant"]
    text: Said = ""
    tool_calls: list[ToolCallIn] | None = None
    action: dict[str, Any] | None = None


class ToolCallOutputIn(Input):
    type: Literal["tool_call_output"]
    tool_call_id: CallId
    response_body: Any = None
    response_status_code: int | None = None
    timed_out: bool | None = None
    error_message: Said | None = None
    interrupted: bool | None = None


class ToolDefinitionIn(Input):
    name: ToolName
    description: Annotated[Text, StringConstraints(max_length=4_000)]
    parameters: dict[str, Any] | list[Any]
    require_speech_before_tool_call: bool = True
    forbid_tool_call_after_speech: Literal[False] = Field(
        False, description="`true` is not supported (400)."
    )


class BuiltInToolIn(Input):
    type: Literal["built_in"]
    name: ToolName
    tool_config: dict[str, Any] | None = None


LanguageTag = Annotated[str, StringConstraints(pattern=r"^[a-z]{2,3}$")]


class ResponsesCreate(Input):
    """`POST /v1/responses` (the SDK's `responses.create`)."""

    system_prompt: Prompt
    input: Annotated[
        list[UserMessageIn | AssistantMessageIn | ToolCallOutputIn],
        Field(min_length=1, max_length=MAX_ITEMS),
    ]
    voice_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    default_language: LanguageTag | None = None
    additional_languages: Annotated[list[LanguageTag], Field(max_length=20)] | None = None
    tool_definitions: Annotated[list[ToolDefinitionIn], Field(max_length=64)] | None = None
    project: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None
    tools: Annotated[list[ToolName | BuiltInToolIn], Field(max_length=64)] | None = None
    phonic_model: Literal["phonic-0.5", "phonic-1", "phonic-1.1"] | None = None
    num_responses: Responses = 1

    def request(self) -> ResponsesRequest:
        """The request as the service reads it."""
        return ResponsesRequest(
            system_prompt=self.system_prompt,
            input=tuple(_item(item) for item in self.input),
            tool_definitions=tuple(
                InlineDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters=tool.parameters,
                    require_speech_before_tool_call=tool.require_speech_before_tool_call,
                )
                for tool in self.tool_definitions or ()
            ),
            tools=tuple(t if isinstance(t, str) else t.name for t in self.tools or ()),
            project=self.project,
            num_responses=self.num_responses,
        )


def _item(item: UserMessageIn | AssistantMessageIn | ToolCallOutputIn) -> Any:
    if isinstance(item, UserMessageIn):
        return UserSaid(text=item.text)
    if isinstance(item, AssistantMessageIn):
        return AssistantSaid(
            text=item.text,
            tool_calls=tuple(
                ProposedCallIn(
                    tool_call_id=call.tool_call_id,
                    name=call.tool.name,
                    request_body=call.request_body,
                    query_params=call.query_params,
                )
                for call in item.tool_calls or ()
            ),
            action=item.action,
        )
    outcome = item.model_dump(exclude={"type", "tool_call_id"}, exclude_none=True)
    return ToolOutput(tool_call_id=item.tool_call_id, outcome=outcome)


class GeneratedToolOut(BaseModel):
    name: str


class GeneratedToolCallOut(BaseModel):
    """The SDK's `GeneratedToolCall`."""

    tool_call_id: str
    tool: GeneratedToolOut
    request_body: dict[str, Any] | None
    query_params: None


class GeneratedResponseOut(BaseModel):
    text: str
    tool_calls: list[GeneratedToolCallOut]
    action: dict[str, Any] | None


class ResponsesOut(BaseModel):
    """The SDK's `GenerateResponsesResponse`: always `num_responses` responses."""

    responses: list[GeneratedResponseOut]

    @classmethod
    def of(cls, found: list[Alternative]) -> ResponsesOut:
        return cls(
            responses=[
                GeneratedResponseOut(
                    text=one.text,
                    tool_calls=[
                        GeneratedToolCallOut(
                            tool_call_id=call.call_id,
                            tool=GeneratedToolOut(name=call.name),
                            request_body=call.request_body,
                            query_params=None,
                        )
                        for call in one.calls
                    ],
                    action=dict(one.action) if one.action is not None else None,
                )
                for one in found
            ]
        )


# --- conversations.replay ---------------------------------------------------------------


class ConversationReplayIn(Input):
    """`POST /v1/conversations/{id}/replay`: `agent` (a name in the conversation's project,
    or an ID) defaults to the conversation's own."""

    agent: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None


class ConversationReplayOut(BaseModel):
    """The SDK's `ConversationsReplayResponse`, with the new conversation's ID."""

    conversation_id: str
    message: str
