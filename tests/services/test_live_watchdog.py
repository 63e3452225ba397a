"""The live socket's watchdog rides out a short store outage and closes 1011 on a long one."""

from __future__ import annotations

import dataclasses

import pytest

from parley.errors import Unavailable
from parley.services import Context
from parley.services.authn import Principal
from parley.services.live import Handshake, watchdog

pytestmark = pytest.mark.anyio


class FlakyRevocations:
    """Unreachable for `down` checks, then answers; `revoked` names what is revoked."""

    def __init__(self, down: int, revoked: frozenset[str] = frozenset()) -> None:
        self.down = down
        self.revoked = revoked
        self.checks = 0

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        raise AssertionError("not used")

    async def is_revoked(self, credential_id: str) -> bool:
        self.checks += 1
        if self.checks <= self.down:
            raise Unavailable()
        return credential_id in self.revoked


def handshake() -> Handshake:
    principal = Principal(kind="session_token", org_id="org_x", credential_id="sess_1")
    return Handshake(principal, "conv-1", False, None, "sess_1")


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "WATCH_INTERVAL_SECONDS", 0.02)
    monkeypatch.setattr(watchdog, "STORE_OUTAGE_SECONDS", 0.3)


async def test_watchdog_short_store_outage_ridden_out_then_revocation_closes(ctx: Context) -> None:
    store = FlakyRevocations(down=5, revoked=frozenset({"sess_1"}))  # ~0.1 s of outage
    verdict = await watchdog.watch(
        dataclasses.replace(ctx, revocations=store), handshake(), lambda: "conv-1"
    )
    assert verdict == (1008, "session token revoked")


async def test_watchdog_store_outage_longer_than_bound_closes_1011(ctx: Context) -> None:
    store = FlakyRevocations(down=10_000)
    verdict = await watchdog.watch(
        dataclasses.replace(ctx, revocations=store), handshake(), lambda: "conv-1"
    )
    assert verdict == (1011, "revocation store unavailable")
    assert store.checks >= 10
