"""The silence settings of an agent or a `config` (API.md section 15, "Silence").

- `no_input_poke_sec` (1-600, None: off): the agent speaks `no_input_poke_text` once per
  silence after that many seconds;
- `no_input_end_conversation_sec` (1-3600, None: off): the conversation then ends
  (`ended_by` `assistant_silence_limit_reached`).

The timer itself runs in the live session (services/live/silence.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from parley.errors import ValidationFailed

DEFAULT_POKE_TEXT: Final = "Are you still there?"
POKE_SEC_RANGE: Final = (1, 600)
END_SEC_RANGE: Final = (1, 3600)
MAX_POKE_TEXT: Final = 2_000


@dataclass(frozen=True, slots=True)
class SilenceSettings:
    """How a conversation answers a user who says nothing (all off by default)."""

    poke_sec: int | None = None
    poke_text: str = DEFAULT_POKE_TEXT
    end_sec: int | None = None

    @property
    def active(self) -> bool:
        return self.poke_sec is not None or self.end_sec is not None


def check_silence(*, poke_sec: object, poke_text: object, end_sec: object) -> None:
    """Raise ValidationFailed naming each field out of its range (None: off, always valid)."""
    errors: dict[str, str] = {}
    for field, value, (low, high) in (
        ("no_input_poke_sec", poke_sec, POKE_SEC_RANGE),
        ("no_input_end_conversation_sec", end_sec, END_SEC_RANGE),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[field] = f"must be an integer from {low} to {high}, or null (off)"
    if not isinstance(poke_text, str) or not poke_text.strip() or len(poke_text) > MAX_POKE_TEXT:
        errors["no_input_poke_text"] = (
            f"must be non-blank text of at most {MAX_POKE_TEXT} characters"
        )
    if errors:
        raise ValidationFailed(param_errors=errors)
