"""The voices installed on this server (API.md sections 4 and 17): the list, one voice,
and a voice's sample by its signed URL."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from parley.api.deps import ApiKeyPrincipal, Ctx, Speech, Synthesis
from parley.api.schemas import error_responses
from parley.api.speech_schemas import VoiceEnvelope, VoiceList, VoiceOut
from parley.services import speech
from parley.text import Label

router = APIRouter(prefix="/v1/voices", tags=["voices"])
VoiceId = Annotated[Label, Path(alias="id", max_length=100, description="A voice's ID.")]


@router.get("", response_model=VoiceList, responses=error_responses(401, 403, 503))
async def list_voices(
    ctx: Ctx, principal: ApiKeyPrincipal, catalog: Speech, maker: Synthesis
) -> VoiceList:
    """List the voices an agent's `voice_id` may name (query parameters such as the SDK's
    `model` are ignored: every voice works with every agent)."""
    del principal  # the API key is the whole check: voices are the same for everyone
    views = speech.voice_views(ctx, catalog, maker)
    return VoiceList(voices=[_out(view) for view in views])


@router.get("/{id}", response_model=VoiceEnvelope, responses=error_responses(401, 403, 404, 503))
async def get_voice(
    ctx: Ctx, voice_id: VoiceId, principal: ApiKeyPrincipal, catalog: Speech, maker: Synthesis
) -> VoiceEnvelope:
    """One voice, by ID or alias (the SDK's `voices.get`); 404 `voice_not_found`."""
    del principal
    return VoiceEnvelope(voice=_out(speech.voice_view(ctx, catalog, maker, voice_id)))


@router.get(
    "/{id}/sample",
    response_class=Response,
    responses={
        200: {"content": {"audio/wav": {}}, "description": "The voice's sample, a WAV file."},
        **error_responses(403, 404, 503),
    },
)
async def voice_sample(
    ctx: Ctx,
    voice_id: VoiceId,
    maker: Synthesis,
    expires: Annotated[str | None, Query(max_length=20)] = None,
    signature: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """A voice's sample, by the signed URL of its `audio_url`: no Bearer credential (an
    `<audio>` element sends none); a wrong, missing or expired signature is 403
    `invalid_signature`."""
    audio = await speech.voice_sample(ctx, maker, voice_id, expires=expires, signature=signature)
    return Response(
        audio,
        media_type="audio/wav",
        headers={"Cache-Control": "private, max-age=86400"},
    )


def _out(view: speech.VoiceView) -> VoiceOut:
    return VoiceOut(
        id=view.id,
        name=view.name,
        language=view.language,
        description=view.description,
        audio_url=view.audio_url,
    )
