"""Speech outside a conversation (API.md section 17): the voices preview (`POST /v1/tts`,
the SDK's `voices.preview`) and the speech stream (`POST /v1/tts/stream`, `tts.stream`)."""

from __future__ import annotations

import base64

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from parley.api.deps import ApiKeyPrincipal, Synthesis
from parley.api.schemas import error_responses
from parley.api.speech_schemas import SpeechIn, SpeechOut
from parley.services import speech

router = APIRouter(prefix="/v1/tts", tags=["voices"])


@router.post("", response_model=SpeechOut, responses=error_responses(400, 401, 403, 503))
async def preview(body: SpeechIn, principal: ApiKeyPrincipal, maker: Synthesis) -> SpeechOut:
    """`text` spoken whole: a base64 WAV file of the `output_format` (default `pcm_24000`)."""
    del principal  # the API key is the whole check: the voices are the same for everyone
    audio = await speech.preview(maker, _request(body))
    return SpeechOut(audio=base64.b64encode(audio).decode("ascii"))


@router.post(
    "/stream",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"application/octet-stream": {}},
            "description": "Raw audio of `output_format` (default `pcm_16000`), sentence by "
            "sentence as it is synthesized.",
        },
        **error_responses(400, 401, 403, 503),
    },
)
async def stream(body: SpeechIn, principal: ApiKeyPrincipal, maker: Synthesis) -> StreamingResponse:
    """`text` spoken as a stream of raw audio, each sentence sent as soon as it is made."""
    del principal
    opened = speech.open_stream(maker, _request(body))
    return StreamingResponse(
        opened.chunks,
        media_type="application/octet-stream",
        headers={"X-Audio-Format": opened.output_format.value},
    )


def _request(body: SpeechIn) -> speech.SpeechRequest:
    return speech.SpeechRequest(
        text=body.text,
        voice_id=body.voice_id,
        speed=body.speed,
        output_format=body.output_format,
        languages=body.languages,
    )
