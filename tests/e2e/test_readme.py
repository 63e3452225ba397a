"""The README's first screen, followed command by command from a fresh clone.

What it does: clones this repository into a temporary directory, reads the two shell blocks
of README.md's first screen (so the test breaks when the README drifts), runs `make serve`
there, takes the first API key from its output, runs the second block line by line (with
that key), and opens the URL it prints in headless Chromium, whose fake microphone speaks:
the page served by Parley connects with the session token from its URL fragment, the agent
greets, hears the utterance and answers; REST then shows the stored conversation, and the
dashboard, signed in with the same key as the first screen says, lists the agent.

What it does not do: install from scratch. The clone's `.venv` is a link to this checkout's
(installing takes minutes), so the code that serves is the one installed there, and
`scripts/install` is kept from reinstalling into it. Port 8000 may be in use on a shared
machine, so the server runs on a free port (`make serve PORT=…`, as the README allows) and
the second block runs with that `PORT` set, as the README says.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser

from tests.cli.test_startup_errors import free_port
from tests.e2e.test_browser_example import browser, event_lines, wait_for_event

__all__ = ["browser"]  # the Chromium fixture with the fake microphone

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
ROOT = Path(__file__).resolve().parents[2]
FIRST_SCREEN_LINES = 40
KEY_SHAPE = re.compile(r"parley_sk_[A-Za-z0-9_-]{43}")


def first_screen() -> tuple[list[str], str]:
    """The commands of the README's first shell block, and the second block's script."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    screen = "\n".join(text.splitlines()[:FIRST_SCREEN_LINES])
    blocks = re.findall(r"```sh\n(.*?)```", screen, re.DOTALL)
    assert len(blocks) >= 2, "the first screen must show two shell blocks"
    commands = [line.split("#")[0].strip() for line in blocks[0].splitlines()]
    return [c for c in commands if c], blocks[1]


class ServeProcess:
    """`make serve` in its own process group; its output collected line by line."""

    def __init__(self, command: str, cwd: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        env["PORT"] = str(port)
        self.lines: list[str] = []
        self.process = subprocess.Popen(  # noqa: S603 - the README's command, in our clone
            ["bash", "-c", command],  # noqa: S607
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the group this test started
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def clone(tmp_path: Path) -> Path:
    target = tmp_path / "parley"
    subprocess.run(  # noqa: S603
        ["git", "clone", "--quiet", str(ROOT), str(target)],  # noqa: S607
        check=True,
        capture_output=True,
    )
    (target / ".venv").symlink_to(ROOT / ".venv")
    os.utime(target / "pyproject.toml", (0, 0))  # older than the venv's stamp: no reinstall
    return target


def wait_until_serving(server: ServeProcess, base: str, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"make serve stopped:\n{server.output()}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"make serve did not answer within {within} s:\n{server.output()}")


def run_script(script: str, cwd: Path, port: int) -> subprocess.CompletedProcess[str]:
    """Run the README's second block with bash, stopping at the first failing command, with
    `PORT` set as after `make serve PORT=…` (the block must not hard-code 8000)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PORT"] = str(port)
    return subprocess.run(  # noqa: S603
        ["bash", "-euo", "pipefail", "-c", script],  # noqa: S607
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_readme_first_screen_keeps_make_serve_and_make_test() -> None:
    commands, _ = first_screen()
    assert commands[:2] == ["make serve", "make test"]


def test_readme_first_screen_says_replies_repeat_without_a_model_and_how_to_attach_one() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    screen = " ".join(text.splitlines()[:FIRST_SCREEN_LINES])
    assert "only repeats what it heard" in screen
    for variable in ("PARLEY_LLM_BASE_URL", "PARLEY_LLM_MODEL", "PARLEY_LLM_API_KEY"):
        assert variable in screen
    assert "https://api.openai.com/v1" in screen  # OpenAI
    assert "http://127.0.0.1:11434/v1" in screen  # Ollama's OpenAI-compatible server


def test_readme_first_screen_says_where_the_dashboard_is_and_how_to_sign_in() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    screen = " ".join(text.splitlines()[:FIRST_SCREEN_LINES])
    assert "`$B/dashboard`" in screen
    assert "sign in with the same API key" in screen


@pytest.mark.timeout(300)
async def test_readme_first_screen_ends_in_a_spoken_conversation(
    tmp_path: Path, browser: Browser
) -> None:
    commands, script = first_screen()
    checkout = await asyncio.to_thread(clone, tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = ServeProcess(commands[0], checkout, port)
    try:
        await asyncio.to_thread(wait_until_serving, server, base)
        output = server.output()
        found = KEY_SHAPE.search(output)
        assert found, output
        key = found.group(0)
        assert "parley api-keys create --org default" in output
        assert (checkout / "parley.db").exists()

        assert "127.0.0.1:8000" not in script, "the block must follow PORT"
        script, replaced = re.subn(r"^KEY=\S+", f"KEY={key}", script, flags=re.MULTILINE)
        assert replaced == 1, "the block must start by setting KEY"
        ran = await asyncio.to_thread(run_script, script, checkout, port)
        assert ran.returncode == 0, ran.stderr
        assert '"name":"support"' in ran.stdout
        url = ran.stdout.strip().splitlines()[-1]
        assert url.startswith(f"{base}/examples/browser/#session_token=parley_st_"), url
        assert url.endswith("&agent=support")

        page = await browser.new_page()
        await page.goto(url)
        await page.click("#connect")
        created = await wait_for_event(page, "conversation_created ")
        greeted = await wait_for_event(page, "assistant_finished_speaking", after=created)
        heard = await wait_for_event(page, "input_text", after=greeted, timeout_s=40)
        await wait_for_event(page, "assistant_finished_speaking", after=heard)
        await page.click("#hangup")
        await wait_for_event(page, "Closed: 1000", after=heard)
        lines = await event_lines(page)
        assert not [line for line in lines if line.startswith(("error ", "warning "))], lines
        conversation_id = lines[created].split("conversation_created ")[1].strip()

        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as api:
            read = await api.get(f"/v1/conversations/{conversation_id}")
        assert read.status_code == 200, read.text
        conversation = read.json()["conversation"]
        assert conversation["status"] == "ended"
        items = [(item["role"], item["text"]) for item in conversation["items"]]
        assert items[0] == ("assistant", "Hello, this is Parley. How can I help?")
        assert items[1][0] == "user"
        assert len(items) >= 3

        # The dashboard, where the first screen says, signed in with the same key.
        await page.goto(f"{base}/dashboard")
        assert page.url.endswith("/dashboard/sign-in")
        await page.fill("input[name=api_key]", key)
        await page.click("button[type=submit]")
        await page.wait_for_url("**/dashboard/agents")
        assert "support" in await page.inner_text("table")
        assert key not in await page.content()
    finally:
        await asyncio.to_thread(server.stop)
    assert "Traceback" not in server.output()
