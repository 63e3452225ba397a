"""Loopback ports for servers the tests start, outside the kernel's ephemeral range.

A port found by binding port 0 comes from the ephemeral range, the same range every
outgoing connection (to PostgreSQL, Redis, a test server) takes its local port from: between
the probe and the server's own bind, another worker's connection can take it, and the server
then refuses to start ("already in use"). So each pytest-xdist worker hands out ports from a
block of its own below that range, skipping any that something already listens on.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

FIRST_PORT = 20_000
BLOCK = 1_500  # ports per worker: 8 workers fit below the ephemeral range's 32768


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = worker.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


_lock = threading.Lock()
_base = FIRST_PORT + BLOCK * (_worker_index() % 8)
# Start at a place that differs per process, so a module run again soon after (a flaky
# port still in TIME_WAIT) does not begin on the same port.
_next = itertools.count(os.getpid() % BLOCK)


def free_port() -> int:
    """A loopback port in this worker's block that nothing listens on now."""
    with _lock:
        for _ in range(BLOCK):
            port = _base + next(_next) % BLOCK
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError(f"no free loopback port in {_base}-{_base + BLOCK - 1}")
