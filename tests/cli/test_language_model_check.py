"""`parley serve` asks the language model named by PARLEY_LLM_BASE_URL for its models once at
start-up: a model that cannot be reached is one warning line naming the variable, and the
service still starts. Against the real OpenAI-protocol server on loopback, and a closed port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.cli.test_startup_errors import free_port
from tests.faults.serve_process import ServeProcess
from tests.llm_server import ChatServer, running_chat_server

from parley.cli.language_model import language_model_warning

KEY = "sk-test-secret-key-0000"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


def test_language_model_check_answering_server_gives_no_warning(chat: ChatServer) -> None:
    assert language_model_warning(chat.base_url, KEY) is None
    assert chat.listings == [f"Bearer {KEY}"]


def test_language_model_check_refusing_key_names_the_key_variable(chat: ChatServer) -> None:
    chat.script.status = 401
    warning = language_model_warning(chat.base_url, KEY)
    assert warning is not None
    assert "HTTP 401" in warning
    assert "PARLEY_LLM_API_KEY" in warning
    assert KEY not in warning


def test_serve_unreachable_language_model_warns_once_and_still_serves(tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"
    server = ServeProcess(
        tmp_path, PARLEY_LLM_BASE_URL=base, PARLEY_LLM_MODEL="m", PARLEY_LLM_API_KEY=KEY
    )
    server.start()
    try:
        assert httpx.get(f"{server.http}/health", timeout=5).status_code == 200
    finally:
        server.ensure_stopped()
    log = server.output.read_text()
    warnings = [line for line in log.splitlines() if "PARLEY_LLM_BASE_URL" in line]
    assert len(warnings) == 1, log
    assert warnings[0].startswith("warning: PARLEY_LLM_BASE_URL: cannot reach "), log
    assert "Traceback" not in log
    assert KEY not in log


def test_serve_reachable_language_model_starts_without_warning(
    tmp_path: Path, chat: ChatServer
) -> None:
    server = ServeProcess(tmp_path, PARLEY_LLM_BASE_URL=chat.base_url, PARLEY_LLM_MODEL="m")
    server.start()
    server.ensure_stopped()
    assert "PARLEY_LLM_BASE_URL" not in server.output.read_text()
    assert len(chat.listings) == 1
