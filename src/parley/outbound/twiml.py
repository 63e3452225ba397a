"""The TwiML Parley gives the carrier (API.md sections 13 and 15), every value XML-escaped:
the answers to its callbacks and the instructions of a live call's update (a transfer).

The one place TwiML is written: the services build each document here, and the HTTP layer
only sends it (`MEDIA_TYPE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
MEDIA_TYPE = "text/xml"
DIAL_TIMEOUT_SECONDS = 20
"""How long a transfer's target rings before the `<Dial>` gives up (API.md section 15)."""


def reject_busy() -> str:
    """Refuse the call with a busy signal (no conversation was made)."""
    return f'{XML_DECLARATION}<Response><Reject reason="busy"/></Response>'


def hang_up() -> str:
    """End the call (a placed call whose conversation is not waiting for it)."""
    return f"{XML_DECLARATION}<Response><Hangup/></Response>"


def empty() -> str:
    """Nothing to do (a callback whose answer the carrier ignores)."""
    return f"{XML_DECLARATION}<Response/>"


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


@dataclass(frozen=True, slots=True)
class Dial:
    """A transfer's `<Dial>`: the number, the caller ID, where the carrier reports."""

    number: str
    caller_id: str | None
    action: str
    """Requested when the dial ends: answered and hung up, or not answered."""
    status_callback: str
    """Requested when the target answers (`statusCallbackEvent="answered"`)."""
    send_digits: str | None = None
    briefing_url: str | None = None
    """A warm transfer: TwiML the target hears before the bridge (`<Number url>`)."""


def dial(spec: Dial) -> str:
    """Put the call through to `spec.number`."""
    attributes = f' timeout="{DIAL_TIMEOUT_SECONDS}" action={quoteattr(spec.action)}'
    if spec.caller_id:
        attributes = f" callerId={quoteattr(spec.caller_id)}" + attributes
    number = f' statusCallbackEvent="answered" statusCallback={quoteattr(spec.status_callback)}'
    if spec.send_digits:
        number = f" sendDigits={quoteattr(spec.send_digits)}" + number
    if spec.briefing_url:
        number += f" url={quoteattr(spec.briefing_url)}"
    return (
        f"{XML_DECLARATION}<Response><Dial{attributes}><Number{number}>"
        f"{escape(spec.number)}</Number></Dial></Response>"
    )


def play(url: str) -> str:
    """Play the audio at `url` (a warm transfer's briefing, to its target)."""
    return f"{XML_DECLARATION}<Response><Play>{escape(url)}</Play></Response>"
