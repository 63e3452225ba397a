"""The text Parley accepts from outside, the same on every database (REST and socket).

- `Text`: free text (prompts, messages). No NUL and no unpaired surrogate anywhere:
  PostgreSQL cannot store NUL in `text`, UTF-8 cannot encode a lone surrogate, and SQLite
  would store what PostgreSQL refuses.
- `Label`: a name, an ID, a URL, an issuer: no control character at all (Unicode category
  Cc: C0, DEL, C1; tabs and newlines included) and no unpaired surrogate.

Both refuse at the boundary with 400 `validation_error` (or a WebSocket `error` frame)
whose `param_errors` names the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

from parley.ids import has_control_characters

TEXT_RULE = "must not contain NUL characters or unpaired surrogates"
LABEL_RULE = "must not contain control characters or unpaired surrogates"


def is_text(value: str) -> bool:
    """Tell whether `value` is storable free text."""
    return "\x00" not in value and _encodable(value)


def is_label(value: str) -> bool:
    """Tell whether `value` may be a name, an ID or a URL (no control character)."""
    return not has_control_characters(value)


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: str) -> str:
    if not is_text(value):
        raise ValueError(TEXT_RULE)
    return value


def _label(value: str) -> str:
    if not is_label(value):
        raise ValueError(LABEL_RULE)
    return value


def _json_text(value: Any) -> Any:
    """Check every string (member names included) of a JSON value."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            _text(item)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


Text = Annotated[str, AfterValidator(_text)]
Label = Annotated[str, AfterValidator(_label)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_text)]
"""A JSON object (a JWK) whose strings are all storable text."""
