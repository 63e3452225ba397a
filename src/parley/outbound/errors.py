"""Why a call leaving the service failed: one class per outcome (STYLE convention 22).

    parley.errors.Unavailable
     └── OutboundError ........... base: the call could not be made or answered in bounds
          ├── OutboundRefused .... the address policy refused the URL or its addresses
          ├── OutboundTimeout .... no complete answer within the time cap
          ├── OutboundTooLarge ... the answer is larger than the byte cap
          └── OutboundFailed ..... no connection, or a broken or malformed answer

Messages say what went wrong and, for a refusal, which operator switch allows it; they never
echo a header, a body, a secret or a resolved address.
"""

from __future__ import annotations

from parley.errors import Unavailable


class OutboundError(Unavailable):
    """A call leaving the service failed; the message is safe to show to its owner."""

    code = "outbound_error"
    message = "The call to the URL failed."


class OutboundRefused(OutboundError):
    """The URL, or an address its host resolved to, is not allowed (nothing was sent)."""

    code = "outbound_refused"
    message = "The URL is not allowed."


class OutboundTimeout(OutboundError):
    """No complete answer arrived in time (resolution, connection, headers and body)."""

    code = "outbound_timeout"
    message = "The URL did not answer in time."


class OutboundTooLarge(OutboundError):
    """The answer's body is larger than the cap (it was abandoned, not read to the end)."""

    code = "outbound_too_large"
    message = "The URL answered with too large a body."


class OutboundFailed(OutboundError):
    """No connection could be made, or the answer was broken or malformed."""

    code = "outbound_failed"
    message = "The URL could not be reached."
