"""Client faults are logged at most once per kind and interval (issue #22 item 3)."""

from __future__ import annotations

import logging

import pytest

from parley.api.client_faults import ClientFaultLog


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_client_fault_flood_logged_once_per_interval_then_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ticks = Ticks()
    faults = ClientFaultLog(logging.getLogger("test.clients"), interval=10, monotonic=ticks)
    with caplog.at_level(logging.WARNING, logger="test.clients"):
        for _ in range(500):
            faults.warning("invalid UTF-8")
        faults.warning("request not received in time")  # another kind has its own line
        ticks.now += 10
        faults.warning("invalid UTF-8")
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "client fault: invalid UTF-8",
        "client fault: request not received in time",
        "client fault: invalid UTF-8 (499 more in the previous 10 s not logged)",
    ]
    assert {record.levelno for record in caplog.records} == {logging.WARNING}
