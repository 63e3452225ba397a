"""Personal data out of what is kept: the text's and the recording's side (API.md section 16,
"Redaction").

`redact` replaces phone numbers, email addresses, card numbers, US SSNs and IBANs by a tag
(`Tag`), written or said as words ("four one five, five five five..."), and reports where
they were (`Redacted.spans`). `tone_spans` turns those spans of a transcript into the times
of the words that said them, and `tone_out` covers those times of the recording with a
1 kHz tone. Pure functions: no I/O, no state, nothing of the rest of Parley.
"""

from parley.redaction.redactor import DEFAULT_REGION, redact
from parley.redaction.spans import Redacted, Span, Tag
from parley.redaction.tone import (
    TONE_DBFS,
    TONE_HZ,
    TimedWord,
    join_words,
    tone_out,
    tone_spans,
)

__all__ = [
    "DEFAULT_REGION",
    "TONE_DBFS",
    "TONE_HZ",
    "Redacted",
    "Span",
    "Tag",
    "TimedWord",
    "join_words",
    "redact",
    "tone_out",
    "tone_spans",
]
