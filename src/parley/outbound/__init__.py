"""One way out to the internet (STYLE convention 22): every call leaving the service, JWKS
fetches, webhook tools, webhooks and the carrier's REST API (`TwilioCalls`), goes through
`OutboundClient` under an `AddressPolicy`, and webhook-style calls are signed by `signing`
(Standard Webhooks).

Importing the package is cheap: httpx loads when a client is made or a URL is checked.
"""

from parley.outbound.carrier import CarrierAccount, HangUp, TwilioCalls
from parley.outbound.client import (
    DRAIN_SECONDS,
    FRAMING_HEADERS,
    HostResolver,
    OutboundClient,
    OutboundResponse,
    resolve_host,
)
from parley.outbound.errors import (
    OutboundError,
    OutboundFailed,
    OutboundRefused,
    OutboundTimeout,
    OutboundTooLarge,
)
from parley.outbound.policy import AddressPolicy, is_public_address, literal_address
from parley.outbound.signing import new_signing_secret, sign, signature_headers

__all__ = [
    "DRAIN_SECONDS",
    "FRAMING_HEADERS",
    "AddressPolicy",
    "CarrierAccount",
    "HangUp",
    "HostResolver",
    "OutboundClient",
    "OutboundError",
    "OutboundFailed",
    "OutboundRefused",
    "OutboundResponse",
    "OutboundTimeout",
    "OutboundTooLarge",
    "TwilioCalls",
    "is_public_address",
    "literal_address",
    "new_signing_secret",
    "resolve_host",
    "sign",
    "signature_headers",
]
