"""Which client addresses the per-client connection cap applies to (issue #38 item 8)."""

from __future__ import annotations

import pickle

import pytest

from parley.api.connection_limits import ConnectionLimits

PROXIES = ConnectionLimits(trusted_proxies=("127.0.0.4", "10.0.0.0/8", "fd00::/8"))

ROWS = [
    ("trusted-address", PROXIES, "127.0.0.4", False),
    ("in-trusted-network", PROXIES, "10.20.30.40", False),
    ("in-trusted-ipv6-network", PROXIES, "fd00::1", False),
    ("other-loopback", PROXIES, "127.0.0.1", True),
    ("outside-network", PROXIES, "11.0.0.1", True),
    ("not-an-address", PROXIES, "unix-socket", True),
    ("no-proxies", ConnectionLimits(), "127.0.0.4", True),
]


@pytest.mark.parametrize(
    ("limits", "host", "capped"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_connections_per_client_capped_unless_trusted_proxy(
    limits: ConnectionLimits, host: str, capped: bool
) -> None:
    assert limits.capped(host) is capped


def test_connection_limits_picklable_for_workers() -> None:
    limits = ConnectionLimits(max_connections_per_client=7, trusted_proxies=("10.0.0.0/8",))
    assert pickle.loads(pickle.dumps(limits)) == limits  # noqa: S301 (our own bytes)
