"""Reading dashboard forms into the values the services take.

The field rules are those of the REST API's wire models (api/schemas.py): the same names,
limits and formats, so a form accepts exactly what the API accepts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.datastructures import FormData

from parley.engine.audio import AudioFormat
from parley.errors import ValidationFailed
from parley.ids import CONVERSATION_ID_RULE, NAME_RULE, is_valid_conversation_id, is_valid_name
from parley.services.agents import DEFAULT_AUDIO_FORMAT

# The engine's formats, the agents' default first (the form's preselected choice).
AUDIO_FORMATS = (
    DEFAULT_AUDIO_FORMAT,
    *(name for name in AudioFormat.names() if name != DEFAULT_AUDIO_FORMAT),
)
E164 = re.compile(r"\+[1-9][0-9]{1,14}")
MAX_NUMBERS = 20
PEM_END = "-----END PUBLIC KEY-----"


def text(form: FormData, name: str, *, max_length: int, required: bool = False) -> str:
    value = form.get(name, "")
    if not isinstance(value, str):
        raise ValidationFailed(param_errors={name: "must be text"})
    value = value.strip()
    if required and not value:
        raise ValidationFailed(param_errors={name: "is required"})
    if len(value) > max_length:
        raise ValidationFailed(param_errors={name: f"at most {max_length} characters"})
    return value


def name(form: FormData, field: str = "name") -> str:
    value = text(form, field, max_length=64, required=True)
    if not is_valid_name(value):
        raise ValidationFailed(param_errors={field: NAME_RULE})
    return value


def audio_format(form: FormData) -> str:
    value = text(form, "audio_format", max_length=16) or AUDIO_FORMATS[0]
    if value not in AUDIO_FORMATS:
        raise ValidationFailed(param_errors={"audio_format": "is not a known audio format"})
    return value


def items(form: FormData, field: str, *, max_length: int = 4000) -> list[str]:
    """Split a text area into its non-empty lines (commas separate too)."""
    raw = text(form, field, max_length=max_length)
    return [part.strip() for part in re.split(r"[\n,]", raw) if part.strip()]


def phone_numbers(form: FormData) -> tuple[str, ...]:
    numbers = items(form, "phone_numbers")
    for number in numbers:
        if not E164.fullmatch(number):
            message = f"{number[:20]} is not an E.164 phone number such as +14155550123"
            raise ValidationFailed(param_errors={"phone_numbers": message})
    if len(numbers) > MAX_NUMBERS or len(set(numbers)) != len(numbers):
        raise ValidationFailed(param_errors={"phone_numbers": "at most 20, without repeats"})
    return tuple(numbers)


def conversation_ids(form: FormData) -> list[str]:
    """Read conversation IDs, one per line; each must follow the conversation ID rule."""
    ids = items(form, "conversation_ids", max_length=20_000)
    for conversation_id in ids:
        if not is_valid_conversation_id(conversation_id):
            message = f"{conversation_id[:40]!r}: {CONVERSATION_ID_RULE}"
            raise ValidationFailed(param_errors={"conversation_ids": message})
    return ids


def checked(form: FormData, field: str) -> bool:
    return form.get(field) in ("on", "true", "1")


def public_keys(form: FormData) -> tuple[object, ...]:
    """Read pasted keys: PEM blocks, one JWK, a JWKS document, or a JSON array of JWKs."""
    raw = text(form, "public_keys", max_length=64_000, required=True)
    if raw.startswith(("{", "[")):
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            raise ValidationFailed(param_errors={"public_keys": "is not valid JSON"}) from None
        if isinstance(parsed, dict):
            parsed = parsed.get("keys", [parsed])
        if not isinstance(parsed, list) or not parsed:
            raise ValidationFailed(param_errors={"public_keys": "holds no key"})
        return tuple(parsed)
    blocks = [block.strip() + "\n" + PEM_END for block in raw.split(PEM_END) if block.strip()]
    if not blocks:
        raise ValidationFailed(param_errors={"public_keys": "holds no key"})
    return tuple(blocks)
