"""Records and service views to wire models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, cast

from parley.api.schemas import (
    AgentRefOut,
    ConversationItemOut,
    ConversationOut,
    JwtConfigOut,
    JwtKeyOut,
)
from parley.clock import isoformat
from parley.records import Conversation
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
    agent = conversation.agent
    return ConversationOut(
        id=conversation.id,
        agent=AgentRefOut(id=agent.id, name=agent.name) if agent else None,
        project=conversation.project,
        status=cast(Literal["pending", "live", "ended"], conversation.status),
        end_user=conversation.end_user,
        external_id=conversation.external_id,
        started_at=isoformat(conversation.started_at) if conversation.started_at else None,
        ended_at=isoformat(conversation.ended_at) if conversation.ended_at else None,
        created_at=isoformat(conversation.created_at),
        items=[
            ConversationItemOut(
                role=cast(Literal["user", "assistant"], item.role),
                text=item.text,
                created_at=isoformat(item.created_at),
            )
            for item in conversation.items
        ],
    )
