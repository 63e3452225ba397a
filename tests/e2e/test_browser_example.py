"""The example page, served by Parley at /examples/browser/, in a real headless Chromium.

The JWT and the agent reach the page in its URL fragment, and its WebSocket base URL is its
own origin. Chromium's fake capture device plays a WAV file as the microphone, so the page's
own AudioWorklet captures, downsamples and streams it to a real uvicorn server over `?jwt=`.
Playback is observed by wrapping `AudioBufferSourceNode.start` before the page loads: every
buffer the page schedules is recorded with its loudness, and its `ended` event proves the
audio clock played it through. Nothing in the page is changed for the test.
"""

from __future__ import annotations

import os
import shutil
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright.async_api import Browser, Page, async_playwright

from parley.engine.audio import resample
from tests import databases, speech
from tests.e2e.conftest import Customer, Server
from tests.factories import unique_name

EXAMPLE_PATH = "/examples/browser/"
CAPTURE_RATE = 48_000
SILENCE_BEFORE_SPEECH_S = 8.0  # the welcome turn is over well before the user speaks
SENTENCE = speech.SENTENCES[4]  # "Can you tell me the balance on my account?"
pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

WELCOME = "Hello, you are talking to the browser test agent."

# Records every buffer the page schedules, and which of them the audio clock played to the end.
PLAYBACK_PROBE = """
window.__parleyPlayback = { started: [], ended: 0 };
const start = AudioBufferSourceNode.prototype.start;
AudioBufferSourceNode.prototype.start = function (when, ...rest) {
  const data = this.buffer ? this.buffer.getChannelData(0) : new Float32Array(0);
  let energy = 0;
  for (let i = 0; i < data.length; i++) energy += data[i] * data[i];
  window.__parleyPlayback.started.push({
    duration: this.buffer ? this.buffer.duration : 0,
    rate: this.buffer ? this.buffer.sampleRate : 0,
    rms: Math.sqrt(energy / Math.max(1, data.length)),
  });
  this.addEventListener("ended", () => { window.__parleyPlayback.ended += 1; });
  return start.call(this, when, ...rest);
};
"""


def chromium_path() -> str:
    """Debian's Chromium (scripts/install installs it), or PARLEY_TEST_CHROMIUM."""
    found = os.environ.get("PARLEY_TEST_CHROMIUM") or shutil.which("chromium")
    if not found or not Path(found).exists():
        pytest.fail(
            "Chromium is needed for the browser example test: run scripts/install as root "
            "(apt-get install chromium) or set PARLEY_TEST_CHROMIUM to a Chromium binary"
        )
    return found


def write_microphone_wav(path: Path) -> None:
    """Silence, then a spoken sentence (hibari's voice), then silence."""
    sentence = resample(speech.spoken(SENTENCE), speech.RATE, CAPTURE_RATE)
    samples = np.concatenate(
        [
            np.zeros(int(CAPTURE_RATE * SILENCE_BEFORE_SPEECH_S), dtype=np.float32),
            sentence,
            np.zeros(CAPTURE_RATE * 6, dtype=np.float32),
        ]
    )
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(CAPTURE_RATE)
        out.writeframes((samples * 32767).astype("<i2").tobytes())


@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """SQLite only: the server paths are covered on both databases by test_ws.py."""
    return databases.sqlite_copy(sqlite_template, tmp_path)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    microphone = tmp_path / "microphone.wav"
    write_microphone_wav(microphone)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium_path(),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-quic",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={microphone}%noloop",
            ],
        )
        try:
            yield launched
        finally:
            await launched.close()


async def event_lines(page: Page) -> list[str]:
    """The page's event log, one line per event, without the time stamps."""
    lines: list[str] = await page.evaluate(
        """() => [...document.querySelectorAll("#events > div")].map((line) =>
             [...line.childNodes].filter((n) => !(n.classList && n.classList.contains("e-time")))
               .map((n) => n.textContent).join(""))"""
    )
    return lines


async def wait_for_event(page: Page, text: str, *, after: int = 0, timeout_s: float = 30) -> int:
    """Wait until an event line at index >= after contains text; return its index."""
    await page.wait_for_function(
        """([text, after]) => [...document.querySelectorAll("#events > div")].slice(after)
             .some((line) => line.textContent.includes(text))""",
        arg=[text, after],
        timeout=timeout_s * 1000,
    )
    lines = await event_lines(page)
    return next(i for i in range(after, len(lines)) if text in lines[i])


async def playback(page: Page) -> dict[str, Any]:
    state: dict[str, Any] = await page.evaluate("window.__parleyPlayback")
    return state


async def wait_for_playback_drained(page: Page, timeout_s: float = 20) -> None:
    """Every buffer scheduled so far has played to its end."""
    await page.wait_for_function(
        """() => window.__parleyPlayback.started.length > 0 &&
                 window.__parleyPlayback.ended === window.__parleyPlayback.started.length""",
        timeout=timeout_s * 1000,
    )


async def transcript(page: Page) -> list[str]:
    lines: list[str] = await page.evaluate(
        """() => [...document.querySelectorAll("#transcript > div")].map((l) => l.textContent)"""
    )
    return lines


@pytest.mark.timeout(180)
async def test_browser_example_talks_to_agent_with_jwt(
    server: Server, customer: Customer, browser: Browser, tmp_path: Path
) -> None:
    """A full call from the page: welcome, microphone turn, Ask, Say, Hang up, then REST."""
    updated = await customer.api.patch(
        f"/v1/agents/{customer.agent}", json={"welcome_message": WELCOME}
    )
    assert updated.status_code == 200, updated.text
    conversation_id = unique_name("browser")
    token = customer.jwt(conversation_id)
    screenshot = tmp_path / "page.png"

    page = await browser.new_page()
    console_errors: list[str] = []
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    await page.add_init_script(PLAYBACK_PROBE)
    await page.goto(f"{server.http}{EXAMPLE_PATH}#jwt={token}&agent={customer.agent}")
    assert await page.input_value("#base-url") == server.ws  # the page's own origin
    assert await page.input_value("#agent") == customer.agent
    assert await page.input_value("#jwt") == token
    assert page.url == f"{server.http}{EXAMPLE_PATH}"  # the fragment is gone from the bar
    await page.click("#connect")

    # The handshake, config and the welcome turn, played through by the page.
    await wait_for_event(page, "Microphone on:")
    created = await wait_for_event(page, f"conversation_created {conversation_id}")
    ready = await wait_for_event(page, "ready_to_start_conversation", after=created)
    welcome_done = await wait_for_event(page, "assistant_finished_speaking", after=ready)
    await wait_for_playback_drained(page)
    welcome = await playback(page)
    welcome_seconds = sum(buffer["duration"] for buffer in welcome["started"])
    assert welcome_seconds > 1.0, welcome
    assert {buffer["rate"] for buffer in welcome["started"]} == {24_000}
    assert max(buffer["rms"] for buffer in welcome["started"]) > 0.02, "the voice is silent"
    assert (await transcript(page))[0] == f"Agent: {WELCOME}"

    # The microphone's utterance: detected by the server's VAD, answered by the agent.
    started = await wait_for_event(page, "user_started_speaking", after=welcome_done)
    finished = await wait_for_event(page, "user_finished_speaking", after=started)
    heard = await wait_for_event(page, "input_text", after=finished)
    words = (await event_lines(page))[heard].split("input_text (en): ", 1)[1]
    assert speech.word_errors(SENTENCE, words) == 0, words
    await wait_for_event(page, "assistant_finished_speaking", after=heard)
    await wait_for_playback_drained(page)
    after_reply = await playback(page)
    assert len(after_reply["started"]) > len(welcome["started"])

    # Ask (generate_reply with typed words) and Say (the agent speaks exact text).
    await page.fill("#say-text", "What are your opening hours?")
    await page.click("#ask")
    asked = await wait_for_event(page, '"type":"generate_reply"', after=heard)
    await wait_for_event(page, "assistant_finished_speaking", after=asked)
    await page.fill("#say-text", "Thank you for calling.")
    await page.click("#say")
    said = await wait_for_event(page, '"type":"say"', after=asked)
    await wait_for_event(page, 'audio_chunk: "Thank you for calling."', after=said)
    await wait_for_event(page, "assistant_finished_speaking", after=said)
    await wait_for_playback_drained(page)

    await page.click("#hangup")
    await wait_for_event(page, "Closed: 1000", after=said)
    lines = await event_lines(page)
    assert not [line for line in lines if line.startswith(("error ", "warning "))], lines
    assert not any("interrupted_response" in line for line in lines), lines
    assert not any(token in line for line in lines), "the JWT is shown in the page's log"
    assert any("audio chunks sent." in line for line in lines)
    assert console_errors == []

    await page.screenshot(path=screenshot, full_page=True)  # kept in the test's tmp_path
    lines_said = await transcript(page)
    assert f"You: {words}" in lines_said
    assert any(line.startswith("Agent: You said: Can you tell me") for line in lines_said)
    assert "You: What are your opening hours?" in lines_said
    assert "Agent: Thank you for calling." in lines_said

    # What the page said and heard is stored, readable with the API key.
    response = await customer.api.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    conversation = response.json()["conversation"]
    assert conversation["status"] == "ended"
    items = [(item["role"], item["text"]) for item in conversation["items"]]
    assert items[0] == ("assistant", WELCOME)
    assert items[1] == ("user", words)
    assert items[2][0] == "assistant"
    assert items[2][1].startswith("You said: Can you tell me the balance on my account")
    assert ("user", "What are your opening hours?") in items
    assert items[-1] == ("assistant", "Thank you for calling.")
