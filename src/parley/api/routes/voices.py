"""`GET /v1/voices`: the voices installed on this server (API.md section 4)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from parley.api.deps import ApiKeyPrincipal, Speech
from parley.api.schemas import error_responses
from parley.services import voices

router = APIRouter(prefix="/v1/voices", tags=["voices"])


class VoiceOut(BaseModel):
    id: str
    name: str
    language: str


class VoiceList(BaseModel):
    voices: list[VoiceOut]


@router.get("", response_model=VoiceList, responses=error_responses(401, 403, 503))
async def list_voices(principal: ApiKeyPrincipal, speech: Speech) -> VoiceList:
    """List the voices an agent's `voice_id` may name (query parameters such as the SDK's
    `model` are ignored: every voice works with every agent)."""
    del principal  # the API key is the whole check: voices are the same for everyone
    listed = voices.list_voices(speech)
    return VoiceList(voices=[VoiceOut(id=v.id, name=v.name, language=v.language) for v in listed])
