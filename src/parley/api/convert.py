"""Records and service views to wire models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, cast

from parley.api.schemas import (
    CallInfoOut,
    ConversationOut,
    JwtConfigOut,
    JwtKeyOut,
    ToolCallOut,
    ToolRefOut,
)
from parley.clock import isoformat
from parley.records import CallInfo, Conversation, ToolCall
from parley.services.event_payloads import conversation_json
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
    """The conversation as API.md sections 5 and 17 show it: the wire shape's one home is
    services/event_payloads.py (webhooks carry the same JSON)."""
    return ConversationOut.model_validate(conversation_json(conversation))


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
