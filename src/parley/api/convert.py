"""Records and service views to wire models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, cast

from parley.api.schemas import (
    AgentRefOut,
    AnalysisOut,
    CallInfoOut,
    ConversationItemOut,
    ConversationOut,
    DeletionInfoOut,
    EndedBy,
    JwtConfigOut,
    JwtKeyOut,
    ProjectRefOut,
    ToolCallOut,
    ToolRefOut,
)
from parley.clock import isoformat, isoformat_or_none
from parley.records import CallInfo, Conversation, ToolCall
from parley.services.jwt_config import JwtConfigView


def jwt_config_out(view: JwtConfigView) -> JwtConfigOut:
    fetched = view.jwks_fetched_at
    return JwtConfigOut(
        issuers=list(view.issuers),
        audience=view.audience,
        jwks_url=view.jwks_url,
        public_keys=[dict(key) for key in view.public_keys],
        keys=[
            JwtKeyOut(
                kid=k.kid, kty=k.kty, alg=k.alg, source=cast(Literal["jwks", "static"], k.source)
            )
            for k in view.keys
        ],
        jwks_fetched_at=isoformat(datetime.fromtimestamp(fetched, tz=UTC)) if fetched else None,
        jwks_error=view.jwks_error,
        require_jti=view.require_jti,
    )


def conversation_out(conversation: Conversation) -> ConversationOut:
    """The conversation as API.md section 5 shows it.

    `ended_by` is null until the conversation ends; `analysis` holds what its socket
    measured (stored when it ends). `call_info` is set for phone calls (API.md section 13).
    """
    agent = conversation.agent
    project = conversation.project
    return ConversationOut(
        id=conversation.id,
        agent=AgentRefOut(id=agent.id, name=agent.name) if agent else None,
        project=ProjectRefOut(id=project.id, name=project.name) if project else None,
        status=cast(Literal["pending", "live", "ended"], conversation.status),
        end_user=conversation.end_user,
        external_id=conversation.external_id,
        started_at=isoformat(conversation.started_at) if conversation.started_at else None,
        ended_at=isoformat(conversation.ended_at) if conversation.ended_at else None,
        ended_by=cast(EndedBy | None, conversation.ended_by),
        duration_ms=conversation.duration_ms,
        call_info=call_info_out(conversation.call_info),
        template_variables=dict(conversation.template_variables),
        analysis=AnalysisOut(
            latencies_ms=list(conversation.latencies_ms),
            interruptions_count=conversation.interruptions_count,
        ),
        audio_url=conversation.audio_url,
        deletion_info=DeletionInfoOut(
            transcripts_deleted_at=isoformat_or_none(conversation.transcripts_deleted_at),
            audio_recordings_deleted_at=isoformat_or_none(conversation.audio_deleted_at),
        ),
        summary=conversation.summary,
        is_redacted=conversation.is_redacted,
        created_at=isoformat(conversation.created_at),
        items=[
            ConversationItemOut(
                role=cast(Literal["user", "assistant"], item.role),
                text=item.text,
                created_at=isoformat(item.created_at),
                tool_calls=[tool_call_out(call) for call in item.tool_calls],
            )
            for item in conversation.items
        ],
    )


def call_info_out(info: CallInfo | None) -> CallInfoOut | None:
    """A phone call's `call_info` as API.md section 5 shows it."""
    if info is None:
        return None
    return CallInfoOut(
        from_phone_number=info.from_phone_number,
        to_phone_number=info.to_phone_number,
        twilio_call_sid=info.twilio_call_sid,
        direction=info.direction,
    )


def tool_call_out(call: ToolCall) -> ToolCallOut:
    """A stored tool call as API.md section 12 shows it."""
    return ToolCallOut(
        id=call.id,
        tool=ToolRefOut(id=call.tool_id, name=call.tool_name),
        parameters=call.parameters,
        output=call.output,
        endpoint_url=call.endpoint_url,
        response_status_code=call.response_status_code,
        duration_ms=call.duration_ms,
        timed_out=call.timed_out,
        error_message=call.error_message,
    )
