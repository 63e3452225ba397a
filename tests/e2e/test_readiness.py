"""The server answers nothing, /health included, before its models are loaded."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
import uvicorn

from parley.app import create_app
from parley.config import Settings
from parley.engine import (
    DefaultEngineFactory,
    PlaceholderRecognizer,
    WhisperRecognizer,
    load_synthesizer,
)
from tests.ports import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class SlowRecognizer(PlaceholderRecognizer):
    """Loads until the test says so."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def warm_up(self) -> None:
        await self.release.wait()


async def test_health_not_answered_before_speech_model_loaded(settings: Settings) -> None:
    recognizer = SlowRecognizer()
    factory = DefaultEngineFactory(load_synthesizer(), recognizer=recognizer)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, engine_factory=factory), port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            await asyncio.sleep(0.5)
            with pytest.raises(httpx.ConnectError):
                await http.get("/health")
            recognizer.release.set()
            for _ in range(100):
                with contextlib.suppress(httpx.ConnectError):
                    response = await http.get("/health")
                    break
                await asyncio.sleep(0.05)
        assert response.status_code == 200
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def test_default_settings_load_whisper_before_serving(settings: Settings) -> None:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        recognizer = application.state.engine_factory.recognizer
        assert isinstance(recognizer, WhisperRecognizer)
        assert recognizer.loaded


async def test_stt_none_uses_placeholder(settings_factory: object) -> None:
    application = create_app(settings_factory(stt="none"))  # type: ignore[operator]
    async with application.router.lifespan_context(application):
        assert isinstance(application.state.engine_factory.recognizer, PlaceholderRecognizer)
