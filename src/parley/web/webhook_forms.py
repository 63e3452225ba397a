"""Reading the webhook form (API.md section 14) into the fields the services take.

Rules:
1. `url` and `description` follow the REST API's wire model (api/webhook_schemas.py): a
   URL of at most 2048 characters without control characters, a description of at most
   1024; the URL rules themselves (https, public address) are services/webhooks.py's.
2. `event_types` are checkboxes, one per type; none ticked is refused naming the field (a
   webhook receives something). An unknown type is the service's refusal.
3. The edit form posts every field; the patch holds only those that differ, so the audit
   trail names what changed. `is_disabled` is a checkbox: unticked re-enables.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.datastructures import FormData

from parley.errors import ValidationFailed
from parley.records import Webhook, WebhookPatch
from parley.text import LABEL_RULE, TEXT_RULE, is_label, is_text
from parley.web import forms

MAX_URL: Final = 2048
MAX_DESCRIPTION: Final = 1024
MAX_EVENT_TYPES: Final = 20


def url(form: FormData) -> str:
    """The endpoint URL (rule 1)."""
    value = forms.text(form, "url", max_length=MAX_URL, required=True)
    if not is_label(value):
        raise ValidationFailed(param_errors={"url": LABEL_RULE})
    return value


def description(form: FormData) -> str:
    value = forms.text(form, "description", max_length=MAX_DESCRIPTION)
    if not is_text(value):
        raise ValidationFailed(param_errors={"description": TEXT_RULE})
    return value


def event_types(form: FormData) -> tuple[str, ...]:
    """The ticked event types, as posted (rule 2)."""
    ticked = [v for v in form.getlist("event_types") if isinstance(v, str)]
    if not ticked:
        raise ValidationFailed(param_errors={"event_types": "tick at least one event type"})
    if len(ticked) > MAX_EVENT_TYPES or not all(is_label(v) and len(v) <= 64 for v in ticked):
        raise ValidationFailed(param_errors={"event_types": "names no known event type"})
    return tuple(ticked)


def webhook_patch(form: FormData, current: Webhook) -> WebhookPatch:
    """Read the edit form into a patch of the fields that differ from `current` (rule 3)."""
    wanted: dict[str, Any] = {
        "url": url(form),
        "event_types": event_types(form),
        "description": description(form),
        "is_disabled": forms.checked(form, "is_disabled"),
    }
    changed = {name: value for name, value in wanted.items() if getattr(current, name) != value}
    return WebhookPatch(**changed)
