"""The official SDK's four SIP calls, answered 501 `not_supported` (API.md section 17).

`agents.add_custom_phone_number`, `agents.delete_custom_phone_number`,
`agents.update_phone_number` and `conversations.sip_outbound_call` need a SIP trunk, which a
self-hosted Parley does not have: each route exists (a customer switching from the hosted
service gets a reason, never a 404), checks the API key like every route, and refuses
without reading its body.
"""

from __future__ import annotations

from fastapi import APIRouter

from parley.api.deps import ApiKeyPrincipal
from parley.api.schemas import SuccessOut, error_responses
from parley.errors import SipTrunkRequired

router = APIRouter(tags=["not offered"])

REFUSED = error_responses(401, 403, 501, 503)


@router.post(
    "/v1/agents/{nameOrId}/custom-phone-numbers", response_model=SuccessOut, responses=REFUSED
)
async def add_custom_phone_number(principal: ApiKeyPrincipal) -> SuccessOut:
    """Refuse: a custom phone number is reached over SIP, and Parley has no SIP trunk."""
    del principal
    raise SipTrunkRequired


@router.delete(
    "/v1/agents/{nameOrId}/custom-phone-numbers", response_model=SuccessOut, responses=REFUSED
)
async def delete_custom_phone_number(principal: ApiKeyPrincipal) -> SuccessOut:
    """Refuse: there is no custom (SIP) phone number to delete."""
    del principal
    raise SipTrunkRequired


@router.patch("/v1/agents/{nameOrId}/phone-numbers", response_model=SuccessOut, responses=REFUSED)
async def update_phone_number(principal: ApiKeyPrincipal) -> SuccessOut:
    """Refuse: a number's SIP configuration endpoint needs a SIP trunk."""
    del principal
    raise SipTrunkRequired


@router.post("/v1/conversations/sip/outbound_call", response_model=SuccessOut, responses=REFUSED)
async def sip_outbound_call(principal: ApiKeyPrincipal) -> SuccessOut:
    """Refuse: a SIP call needs a SIP trunk (phone calls go out through Twilio instead)."""
    del principal
    raise SipTrunkRequired
