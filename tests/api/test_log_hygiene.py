"""Credentials never reach a log line (API.md section 1)."""

from __future__ import annotations

import logging

import pytest

from parley.api import log_hygiene
from parley.api.log_hygiene import ServerLogHygiene, redact
from parley.api.uvicorn_ws import WarningsAndErrors


def test_redact_credential_query_parameters() -> None:
    line = (
        '127.0.0.1:1 - "WebSocket /v1/sts/ws?conversation_id=c1&jwt=eyJ.a.b'
        '&session_token=parley_st_x&conversation_token=parley_ct_y" 101'
    )
    cleaned = redact(line)
    assert "eyJ" not in cleaned
    assert "parley_st_x" not in cleaned
    assert "parley_ct_y" not in cleaned
    assert "conversation_id=c1" in cleaned
    assert cleaned.count("[redacted]") == 3


def test_uvicorn_websocket_line_redacted() -> None:
    record = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        __file__,
        1,
        '%s - "WebSocket %s" [accepted]',
        ("127.0.0.1:5", "/v1/sts/ws?jwt=eyJhbGciOi.e30.sig"),
        None,
    )
    assert ServerLogHygiene().filter(record)
    assert "eyJ" not in record.getMessage()


def test_refused_handshake_false_alarm_dropped() -> None:
    record = logging.LogRecord(
        "uvicorn.error",
        logging.ERROR,
        __file__,
        1,
        "ASGI callable returned without completing handshake.",
        None,
        None,
    )
    assert not ServerLogHygiene().filter(record)


def test_websocket_protocol_logs_warnings_and_errors_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="uvicorn.error")
    log_hygiene.install()  # as the app does: its records pass uvicorn.error's filter
    logger = WarningsAndErrors(logging.getLogger("uvicorn.error"))
    assert not logger.isEnabledFor(logging.INFO)
    assert logger.level == logging.WARNING  # what uvicorn reads before its TRACE lines
    logger.info("connection open")
    logger.debug("> HTTP/1.1 101 Switching Protocols")
    logger.warning("a warning about %s", "?jwt=eyJ.e30.sig")
    logger.error("an error")
    messages = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert messages == [
        ("uvicorn.error", logging.WARNING, "a warning about ?jwt=[redacted]"),
        ("uvicorn.error", logging.ERROR, "an error"),
    ]


def test_recording_signed_url_signature_redacted_in_access_line() -> None:
    """A recording's signed URL is a credential for an hour (API.md section 16)."""
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        (
            "127.0.0.1:5",
            "GET",
            "/v1/conversations/c1/audio?expires=99&signature=Zm9vYmFy",
            "1.1",
            200,
        ),
        None,
    )
    assert ServerLogHygiene().filter(record)
    assert "Zm9vYmFy" not in record.getMessage()
    assert "expires=99&signature=[redacted]" in record.getMessage()
