"""Wire models of webhooks and their deliveries (API.md section 14), beside api/schemas.py.

Types and sizes are checked here; which URLs and event types are allowed is
services/webhooks.py's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import Input, Timestamp
from parley.clock import isoformat, isoformat_or_none
from parley.records import Webhook, WebhookDelivery, WebhookPatch
from parley.text import Label, Text

WebhookUrl = Annotated[Label, StringConstraints(min_length=1, max_length=2048)]
EventTypes = Annotated[
    list[Annotated[Label, StringConstraints(max_length=64)]], Field(max_length=20)
]
Description = Annotated[Text, StringConstraints(max_length=1024)]


class WebhookCreate(Input):
    url: WebhookUrl = Field(description="https on a public address (as webhook tools).")
    event_types: EventTypes | None = Field(
        default=None, description="The event types it receives; default: all."
    )
    description: Description = ""


class WebhookUpdate(Input):
    """A partial update: only the fields present change; `event_types: null` means all."""

    url: WebhookUrl | None = None
    event_types: EventTypes | None = None
    description: Description | None = None
    is_disabled: bool | None = None

    def patch(self) -> WebhookPatch:
        """The fields sent, as a patch; null `url`, `description` or `is_disabled` are
        refused by `null_fields` first."""
        values: dict[str, object] = {}
        for name in self.model_fields_set:
            value = getattr(self, name)
            values[name] = tuple(value) if name == "event_types" and value is not None else value
        return WebhookPatch(**values)  # type: ignore[arg-type]

    def null_fields(self) -> list[str]:
        """The fields sent as null that may not be null."""
        nullable = {"event_types"}
        return sorted(
            name for name in self.model_fields_set - nullable if getattr(self, name) is None
        )


class WebhookOut(BaseModel):
    id: str
    url: str
    event_types: list[str]
    description: str
    is_disabled: bool
    created_at: Timestamp

    @classmethod
    def of(cls, webhook: Webhook) -> WebhookOut:
        """The webhook as API.md section 14 shows it: never its secret."""
        return cls(
            id=webhook.id,
            url=webhook.url,
            event_types=list(webhook.event_types),
            description=webhook.description,
            is_disabled=webhook.is_disabled,
            created_at=isoformat(webhook.created_at),
        )


class WebhookCreated(BaseModel):
    webhook: WebhookOut
    secret: str = Field(description="`whsec_…`: shown once, never again.")


class WebhookEnvelope(BaseModel):
    webhook: WebhookOut


class WebhookList(BaseModel):
    webhooks: list[WebhookOut]


class SecretOut(BaseModel):
    secret: str = Field(description="The new `whsec_…`; the previous one signs too for 24 h.")


class DeliveryOut(BaseModel):
    id: str = Field(description="The `msg_…` ID, sent as `webhook-id` on every attempt.")
    event_type: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_attempt_at: Timestamp | None
    last_status_code: int | None
    next_attempt_at: Timestamp | None = Field(description="null when none is due.")

    @classmethod
    def of(cls, delivery: WebhookDelivery) -> DeliveryOut:
        pending = delivery.status == "pending"
        return cls(
            id=delivery.id,
            event_type=delivery.event_type,
            status=delivery.status,
            attempts=delivery.attempts,
            last_attempt_at=isoformat_or_none(delivery.last_attempt_at),
            last_status_code=delivery.last_status_code,
            next_attempt_at=isoformat_or_none(delivery.next_attempt_at) if pending else None,
        )


class DeliveryList(BaseModel):
    deliveries: list[DeliveryOut]
    next_cursor: str | None


class DeliveryEnvelope(BaseModel):
    delivery: DeliveryOut
