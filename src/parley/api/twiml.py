"""The TwiML the voice webhook answers (API.md section 13): every value XML-escaped."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import quoteattr

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
MEDIA_TYPE = "text/xml"


def reject_busy() -> str:
    """Refuse the call with a busy signal (no conversation was made)."""
    return f'{XML_DECLARATION}<Response><Reject reason="busy"/></Response>'


def connect_stream(url: str, parameters: Sequence[tuple[str, str]]) -> str:
    """Connect the call to the media socket at `url`, passing `parameters` to its `start`."""
    passed = "".join(
        f"<Parameter name={quoteattr(name)} value={quoteattr(value)}/>"
        for name, value in parameters
    )
    return (
        f"{XML_DECLARATION}<Response><Connect><Stream url={quoteattr(url)}>{passed}</Stream>"
        "</Connect></Response>"
    )
