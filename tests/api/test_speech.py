"""The voices and speech outside a conversation (API.md section 17): `voices.get` with its
sample's signed URL, `voices.preview` (`POST /v1/tts`) and the speech stream's checks,
through the official SDK in-process and raw HTTP where the contract says more. The stream
over a real server (it must really stream) is tests/e2e/test_official_sdk_voice_calls.py."""

from __future__ import annotations

import base64
import io
import wave
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from phonic import AsyncPhonic
from phonic.core.api_error import ApiError
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.engine import Samples, Synthesizer
from parley.services import Context
from parley.services.speech import SAMPLE_URL_SECONDS, SpeechMaker, sample_url

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]
TWO_SENTENCES = "Thanks for calling the bistro. Your table for two is booked for seven."


def read_wav(data: bytes) -> tuple[int, int, np.ndarray]:
    """(sample rate, sample width, samples as float) of a mono PCM WAV."""
    with wave.open(io.BytesIO(data)) as file:
        assert file.getnchannels() == 1
        rate, width = file.getframerate(), file.getsampwidth()
        frames = file.readframes(file.getnframes())
    return rate, width, np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768


def is_speech(samples: np.ndarray, rate: int, *, min_seconds: float) -> bool:
    """Long enough, loud enough, and not one steady tone: voiced and quiet stretches."""
    if len(samples) < min_seconds * rate:
        return False
    windows = samples[: len(samples) // 400 * 400].reshape(-1, 400)
    levels = np.sqrt((windows**2).mean(axis=1))
    return bool(levels.max() > 0.05 and (levels < 0.01).mean() > 0.02)


async def test_sdk_voices_get_answers_the_voice_with_its_sample_url(
    sdk: AsyncPhonic, tenant: Tenant
) -> None:
    voice = (await sdk.voices.get("heart")).voice
    assert voice.id == "heart"
    assert voice.name == "Heart"
    assert voice.description == "American English, female"
    assert (voice.model_extra or {})["language"] == "en"
    sample = await tenant.client.get(voice.audio_url.replace("http://127.0.0.1:8000", ""))
    assert sample.status_code == 200, sample.text
    assert sample.headers["content-type"] == "audio/wav"
    rate, width, samples = read_wav(sample.content)
    assert (rate, width) == (24_000, 2)
    assert is_speech(samples, rate, min_seconds=1.5)


async def test_sdk_voices_list_items_carry_the_sdk_members(sdk: AsyncPhonic) -> None:
    (heart,) = [voice for voice in (await sdk.voices.list()).voices if voice.id == "heart"]
    assert heart.description == "American English, female"
    assert "/v1/voices/heart/sample?expires=" in heart.audio_url


async def test_voices_get_alias_answers_its_voice(tenant: Tenant) -> None:
    response = await tenant.client.get("/v1/voices/us_female")
    assert response.status_code == 200, response.text
    assert response.json()["voice"]["id"] == "heart"


async def test_voices_get_unknown_voice_404_voice_not_found(
    sdk: AsyncPhonic, tenant: Tenant
) -> None:
    assert_error(await tenant.client.get("/v1/voices/nobody"), 404, "voice_not_found")
    with pytest.raises(ApiError) as refused:
        await sdk.voices.get("nobody")
    assert refused.value.status_code == 404


async def test_voices_get_without_api_key_401(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/voices/heart"), 401, "unauthorized")


async def test_voice_sample_needs_no_bearer_but_a_signature(
    client: httpx.AsyncClient, ctx: Context
) -> None:
    url = urlsplit(sample_url(ctx, "heart"))
    query = parse_qs(url.query)
    assert (await client.get(f"{url.path}?{url.query}")).status_code == 200
    assert_error(await client.get(url.path), 403, "invalid_signature")
    forged = f"{url.path}?expires={query['expires'][0]}&signature={'A' * 43}"
    assert_error(await client.get(forged), 403, "invalid_signature")
    other = f"/v1/voices/us_female/sample?{url.query}"  # signed for another voice ID
    assert_error(await client.get(other), 403, "invalid_signature")


async def test_voice_sample_expired_url_403(client: httpx.AsyncClient, ctx: Context) -> None:
    url = urlsplit(sample_url(ctx, "heart"))
    expires = int(parse_qs(url.query)["expires"][0])
    assert expires - ctx.clock.time() == pytest.approx(SAMPLE_URL_SECONDS, abs=2)
    signature = parse_qs(url.query)["signature"][0]
    stale = expires - SAMPLE_URL_SECONDS - 10
    response = await client.get(f"{url.path}?expires={stale}&signature={signature}")
    assert_error(response, 403, "invalid_signature")


class CountingSynthesizer:
    """The real synthesizer, counting its sentences."""

    def __init__(self, real: Synthesizer) -> None:
        self.real = real
        self.sentences = 0
        self.sample_rate = real.sample_rate

    def resolve_voice(self, voice_id: str) -> str | None:
        return self.real.resolve_voice(voice_id)

    def voices(self) -> tuple[str, ...]:
        return self.real.voices()

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        self.sentences += 1
        return await self.real.synthesize(text, voice=voice, speed=speed)


async def test_voice_sample_rendered_once_per_voice(
    app: FastAPI, client: httpx.AsyncClient, ctx: Context
) -> None:
    counting = CountingSynthesizer(app.state.engine_factory.synthesizer)
    app.state.speech_maker = SpeechMaker(counting)  # type: ignore[arg-type]
    url = urlsplit(sample_url(ctx, "heart"))
    first = await client.get(f"{url.path}?{url.query}")
    made = counting.sentences
    assert made >= 1
    second = await client.get(f"{url.path}?{url.query}")
    assert second.content == first.content
    assert counting.sentences == made


async def test_sdk_voices_preview_answers_a_base64_wav_of_speech(sdk: AsyncPhonic) -> None:
    answer = await sdk.voices.preview(text=TWO_SENTENCES, voice_id="heart")
    rate, width, samples = read_wav(base64.b64decode(answer.audio))
    assert (rate, width) == (24_000, 2)
    assert is_speech(samples, rate, min_seconds=3.0)


async def test_sdk_voices_preview_output_format_sets_the_wav(sdk: AsyncPhonic) -> None:
    answer = await sdk.voices.preview(text="Hello there.", output_format="pcm_8000")
    rate, _, samples = read_wav(base64.b64decode(answer.audio))
    assert rate == 8_000
    assert is_speech(samples, rate, min_seconds=0.5)
    mulaw = base64.b64decode(
        (await sdk.voices.preview(text="Hello there.", output_format="mulaw_8000")).audio
    )
    assert (mulaw[:4], mulaw[8:12]) == (b"RIFF", b"WAVE")
    assert int.from_bytes(mulaw[20:22], "little") == 7  # WAVE_FORMAT_MULAW
    assert int.from_bytes(mulaw[24:28], "little") == 8_000


async def test_sdk_voices_preview_speed_changes_the_pace(sdk: AsyncPhonic) -> None:
    lengths = {}
    for speed in (0.5, 1.0, 2.0):
        answer = await sdk.voices.preview(text=TWO_SENTENCES, speed=speed)
        lengths[speed] = len(read_wav(base64.b64decode(answer.audio))[2])
    assert lengths[2.0] < 0.7 * lengths[1.0]
    assert lengths[0.5] > 1.4 * lengths[1.0]


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"text": "x" * 5_001}, "text", "validation_error"),
        ({"text": ""}, "text", "validation_error"),
        ({"text": "Hi.", "speed": 2.5}, "speed", "validation_error"),
        ({"text": "Hi.", "speed": 0.4}, "speed", "validation_error"),
        ({"text": "Hi.", "voice_id": "nobody"}, "voice_id", "unknown_voice"),
        ({"text": "Hi.", "output_format": "mp3"}, "output_format", "validation_error"),
        ({"text": "Hi.", "languages": ["de"]}, "languages", "unsupported_language"),
        ({"text": "Hi.", "model": "other"}, "model", "validation_error"),
        ({"text": "Hi.", "pitch": 2}, "pitch", "validation_error"),
    ],
    ids=[
        "text_over_5000",
        "text_empty",
        "speed_over_2",
        "speed_under_half",
        "unknown_voice",
        "unknown_format",
        "language_not_english",
        "unknown_model",
        "unknown_member",
    ],
)
async def test_tts_bad_request_400_names_the_field(
    tenant: Tenant, body: dict[str, object], field: str, code: str
) -> None:
    for path in ("/v1/tts", "/v1/tts/stream"):  # the preview and the stream check alike
        response = await tenant.client.post(path, json=body)
        error = assert_error(response, 400, code)
        assert field in error["param_errors"], (path, error)


async def test_tts_text_of_5000_chars_accepted(tenant: Tenant) -> None:
    text = "Hello there." + " " * 4_984 + "Bye."  # the limit counts characters, spaces too
    assert len(text) == 5_000
    response = await tenant.client.post("/v1/tts/stream", json={"text": text})
    assert response.status_code == 200, response.text
    assert len(response.content) > 16_000 * 2  # a second of speech at pcm_16000


@pytest.mark.parametrize("path", ["/v1/tts", "/v1/tts/stream"])
async def test_tts_without_api_key_401(client: httpx.AsyncClient, path: str) -> None:
    assert_error(await client.post(path, json={"text": "Hi."}), 401, "unauthorized")


async def test_sdk_tts_stream_answers_raw_pcm_16000_speech(sdk: AsyncPhonic) -> None:
    audio = b"".join([chunk async for chunk in sdk.tts.stream(text=TWO_SENTENCES)])
    samples = np.frombuffer(audio, dtype="<i2").astype(np.float64) / 32768
    assert is_speech(samples, 16_000, min_seconds=3.0)
    preview = await sdk.voices.preview(text=TWO_SENTENCES, output_format="pcm_16000")
    assert read_wav(base64.b64decode(preview.audio))[2].size == samples.size


async def test_tts_stream_mulaw_8000_is_one_byte_a_sample(tenant: Tenant) -> None:
    body = {"text": TWO_SENTENCES, "output_format": "mulaw_8000"}
    mulaw = await tenant.client.post("/v1/tts/stream", json=body)
    pcm = await tenant.client.post("/v1/tts/stream", json={**body, "output_format": "pcm_8000"})
    assert mulaw.headers["x-audio-format"] == "mulaw_8000"
    assert len(mulaw.content) * 2 == len(pcm.content)
