"""Credentials never reach a log line (API.md section 1)."""

from __future__ import annotations

import logging

from parley.api.log_hygiene import ServerLogHygiene, redact


def test_redact_credential_query_parameters() -> None:
    line = (
        '127.0.0.1:1 - "WebSocket /v1/sts/ws?conversation_id=c1&jwt=eyJ.a.b'
        '&session_token=parley_st_x" 101'
    )
    cleaned = redact(line)
    assert "eyJ" not in cleaned
    assert "parley_st_x" not in cleaned
    assert "conversation_id=c1" in cleaned
    assert cleaned.count("[redacted]") == 2


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
