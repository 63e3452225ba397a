"""An agent's delivery (API.md section 17): how it greets, speaks and listens.

The members, the official SDK's, each honoured by the engine (docs/engine.md):

- `generate_welcome_message` (default false): the model writes the welcome at the start,
  as its first reply (the agent's `welcome_message` is not used); with the rule-based
  replier (no PARLEY_LLM_BASE_URL) that reply is its generic greeting;
- `is_welcome_message_interruptible` (default true): false, the user's speech (or a key)
  during the welcome does not cut it;
- `audio_speed` (0.5-2.0, default 1.0): the synthesizer's pace;
- `timezone` (an IANA name the server's time zone database knows; default null): every
  reply's system prompt ends with the local time there; null, no time is told;
- `pronunciation_dictionary` (at most 100 `{word, pronunciation}`, words unique whatever
  their case): each word, whole and in any case, is replaced by its pronunciation in the
  text the synthesizer gets; the transcript keeps the word;
- `vad_min_silence_duration_ms` (100-5000; null: the server's `PARLEY_VAD_END_SILENCE_MS`,
  or the end-of-turn model's wait): the silence that ends the user's turn;
- `vad_threshold` (0.1-0.9; null: the server's 0.5): the speech probability at which the
  user starts speaking (the turn goes on above 0.7 times it).

The API checks each member as it parses it (400 `validation_error` naming it);
`check_delivery` checks a whole record the same way for the services' other callers.
"""

from __future__ import annotations

import functools
import zoneinfo
from typing import Final

from parley.errors import ValidationFailed
from parley.records import Delivery, PronunciationEntry

AUDIO_SPEED_RANGE: Final = (0.5, 2.0)
VAD_MIN_SILENCE_MS_RANGE: Final = (100, 5_000)
VAD_THRESHOLD_RANGE: Final = (0.1, 0.9)
MAX_PRONUNCIATIONS: Final = 100
MAX_WORD: Final = 100
MAX_PRONUNCIATION: Final = 200
TIMEZONE_RULE: Final = "must be an IANA time zone name, such as Europe/Berlin"


@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def is_timezone(name: str) -> bool:
    """Tell whether `name` is a zone of the server's time zone database."""
    return name in _zones()


def repeated_word(entries: tuple[PronunciationEntry, ...]) -> str | None:
    """The first word listed twice (whatever its case), or None."""
    seen: set[str] = set()
    for entry in entries:
        key = entry.word.casefold()
        if key in seen:
            return entry.word
        seen.add(key)
    return None


def check_delivery(delivery: Delivery) -> None:
    """Raise ValidationFailed naming each member out of its rule (see the module doc)."""
    errors: dict[str, str] = {}
    low, high = AUDIO_SPEED_RANGE
    if not low <= delivery.audio_speed <= high:
        errors["audio_speed"] = f"must be from {low} to {high}"
    if delivery.timezone is not None and not is_timezone(delivery.timezone):
        errors["timezone"] = TIMEZONE_RULE
    silence = delivery.vad_min_silence_duration_ms
    low_ms, high_ms = VAD_MIN_SILENCE_MS_RANGE
    if silence is not None and not low_ms <= silence <= high_ms:
        errors["vad_min_silence_duration_ms"] = f"must be from {low_ms} to {high_ms}, or null"
    threshold = delivery.vad_threshold
    low, high = VAD_THRESHOLD_RANGE
    if threshold is not None and not low <= threshold <= high:
        errors["vad_threshold"] = f"must be from {low} to {high}, or null"
    entries = delivery.pronunciation_dictionary
    if len(entries) > MAX_PRONUNCIATIONS:
        errors["pronunciation_dictionary"] = f"must have at most {MAX_PRONUNCIATIONS} entries"
    elif (word := repeated_word(entries)) is not None:
        errors["pronunciation_dictionary"] = f"lists the word {word!r} twice"
    elif any(not _entry_fits(entry) for entry in entries):
        errors["pronunciation_dictionary"] = (
            f"needs words of 1-{MAX_WORD} and pronunciations of 1-{MAX_PRONUNCIATION} characters"
        )
    if errors:
        raise ValidationFailed(param_errors=errors)


def _entry_fits(entry: PronunciationEntry) -> bool:
    word, said = entry.word.strip(), entry.pronunciation.strip()
    return 0 < len(word) <= MAX_WORD and 0 < len(said) <= MAX_PRONUNCIATION
