"""`parley serve` exits clean after a phone call (issue #38): no native object of the call
outlives the interpreter, so its output has no `nanobind: leaked` line (libsoxr's streams,
which the call's listener resamples through, were the ones reported).

A real `parley serve` on embedded SQLite takes a call from the simulated carrier
(tests/carrier.py), hears the caller speak, and is stopped with SIGTERM, after the caller
hung up or while the call is still live.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests import speech
from tests.carrier import phone_frames
from tests.faults.serve_process import ServeProcess
from tests.faults.test_phone_crash import DATABASE, live_call, status

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.parametrize("hang_up", [True, False], ids=["after-hang-up", "mid-call"])
@pytest.mark.timeout(180)
async def test_serve_exit_after_phone_call_leaks_no_native_object(
    tmp_path: Path, hang_up: bool
) -> None:
    serve = ServeProcess(tmp_path, **DATABASE)
    try:
        serve.start()
        assert serve.first_key is not None
        stream, twiml = await live_call(serve, serve.first_key)
        conversation_id = twiml.parameters["conversation_id"]
        try:
            await stream.speak(phone_frames(0.3, speech.spoken(speech.SENTENCES[0]), 0.2))
            if hang_up:
                await stream.stop()
                deadline = time.monotonic() + 10
                while (await status(serve, serve.first_key, conversation_id))["status"] != "ended":
                    assert time.monotonic() < deadline, "the call did not end"
                    await asyncio.sleep(0.05)
            serve.terminate()
        finally:
            await stream.close()
    finally:
        serve.ensure_stopped()
    assert serve.process is not None
    assert serve.process.returncode == 0, serve.output.read_text()[-3000:]
    leaked = [line for line in serve.output.read_text().splitlines() if "nanobind" in line]
    assert leaked == []
