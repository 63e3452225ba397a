"""PARLEY_PUBLIC_URL, unset, follows `parley serve --host --port` (API.md sections 11 and 13):
the start-up line names the public URL in force, and a carrier configured with the voice URL
Parley shows reaches it, signs for it and streams to the URL its TwiML names.

Each test runs the real `parley serve` in a subprocess, as an operator would.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.carrier import MediaStream, SimulatedCarrier
from tests.cli.test_startup_errors import free_port, stop
from tests.faults.serve_process import ServeProcess

from parley.config import Settings, listening_url

DATABASE = {"PARLEY_DATABASE_URL": "sqlite:///parley.db"}
VOICE_PATH = "/v1/telephony/twilio/voice"
MEDIA_PATH = "/v1/telephony/twilio/media"


def start_line(*args: str, cwd: Path, **variables: str) -> str:
    """Run `parley serve ARGS` until it prints its `Public URL:` line; return that line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.update({"PARLEY_STT": "none", **DATABASE, **variables})
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "parley", "serve", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith("Public URL:"):
                return line.strip()
        pytest.fail(f"no `Public URL:` line: {''.join(seen)}")
    finally:
        stop(process)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "http://127.0.0.1:18731"),
        ("0.0.0.0", "http://127.0.0.1:18731"),  # noqa: S104 - the host being tested
        ("::", "http://[::1]:18731"),
        ("[::]", "http://[::1]:18731"),
        ("::1", "http://[::1]:18731"),
        ("localhost", "http://localhost:18731"),
        ("10.0.0.7", "http://10.0.0.7:18731"),
    ],
    ids=[
        "loopback",
        "ipv4-wildcard",
        "ipv6-wildcard",
        "ipv6-wildcard-brackets",
        "ipv6",
        "name",
        "address",
    ],
)
def test_listening_url_names_a_host_that_reaches_the_server(host: str, expected: str) -> None:
    assert listening_url(host, 18731) == expected


def test_listening_url_of_the_documented_defaults_is_the_documented_public_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """API.md section 11: `--host 127.0.0.1 --port 8000` gives `http://127.0.0.1:8000`."""
    # An in-process `serve` of an earlier test on this worker may have set it for its workers.
    monkeypatch.delenv("PARLEY_PUBLIC_URL", raising=False)
    built = Settings(_env_file=None)  # type: ignore[call-arg]
    assert listening_url("127.0.0.1", 8000) == built.public_url == "http://127.0.0.1:8000"
    assert built.public_host == "127.0.0.1"


@pytest.mark.anyio
@pytest.mark.e2e
async def test_serve_unset_public_url_follows_port_for_voice_url_twiml_and_stream(
    tmp_path: Path,
) -> None:
    serve = ServeProcess(tmp_path, **DATABASE)
    port = serve.port
    public = f"http://127.0.0.1:{port}"
    try:
        serve.start()
        assert serve.first_key is not None
        shown = [
            line for line in serve.output.read_text().splitlines() if line.startswith("Public URL")
        ]
        assert shown == [
            f"Public URL: {public} (PARLEY_PUBLIC_URL is unset: it follows --host and --port)"
        ]
        headers = {"Authorization": f"Bearer {serve.first_key}"}
        async with httpx.AsyncClient(base_url=serve.http, headers=headers, timeout=30) as api:
            # The operator pastes the voice URL Parley shows into the carrier's console.
            carrier = SimulatedCarrier(http=api, voice_url="unknown yet")
            body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
            account = await api.put("/v1/telephony/twilio", json=body)
            assert account.status_code == 200, account.text
            assert account.json()["voice_url"] == public + VOICE_PATH
            carrier.voice_url = account.json()["voice_url"]
            number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
            made = await api.post(
                "/v1/agents",
                json={"name": "desk", "welcome_message": None, "phone_numbers": [number]},
            )
            assert made.status_code == 201, made.text
            twiml = await carrier.call(to=number)  # signed over the public URL: accepted
            assert not twiml.rejected, twiml
            assert twiml.stream_url == f"ws://127.0.0.1:{port}{MEDIA_PATH}"
            stream = await MediaStream.open(twiml.stream_url, twiml.parameters)
            try:
                conversation = f"/v1/conversations/{twiml.parameters['conversation_id']}"
                deadline = time.monotonic() + 20
                while (await api.get(conversation)).json()["conversation"]["status"] != "live":
                    assert time.monotonic() < deadline, "the stream the TwiML named never started"
                    await asyncio.sleep(0.05)
            finally:
                await stream.close()
    finally:
        serve.ensure_stopped()


def test_serve_wildcard_host_public_url_names_loopback_and_says_to_set_it(
    tmp_path: Path,
) -> None:
    port = free_port()
    line = start_line("--host", "0.0.0.0", "--port", str(port), cwd=tmp_path)  # noqa: S104
    assert line.startswith(
        f"Public URL: http://127.0.0.1:{port} (PARLEY_PUBLIC_URL is unset: it follows --host "
        "and --port; --host 0.0.0.0 listens on every address: set PARLEY_PUBLIC_URL"
    ), line


def test_serve_public_url_set_is_kept_whatever_the_port(tmp_path: Path) -> None:
    port = free_port()
    line = start_line(
        "--port", str(port), cwd=tmp_path, PARLEY_PUBLIC_URL="https://calls.example.com/"
    )
    assert line == "Public URL: https://calls.example.com (PARLEY_PUBLIC_URL)"
