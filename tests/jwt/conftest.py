"""Fixtures for the JWT kernel tests: keys of every algorithm, a frozen clock, issuers."""

from __future__ import annotations

import pytest
from tests.jwt.kit import ISS, ORG, OTHER_ISS, OTHER_ORG, FrozenClock, InMemoryIssuers, Signer
from tests.jwt.kit import make_signer as _make_signer

from parley.jwt import Algorithm

ALGS: tuple[Algorithm, ...] = ("EdDSA", "ES256", "RS256")


@pytest.fixture(scope="session")
def signers() -> dict[Algorithm, Signer]:
    """One registered key per algorithm (RSA generation is slow: made once per session)."""
    return {alg: _make_signer(alg) for alg in ALGS}


@pytest.fixture(scope="session")
def signer(signers: dict[Algorithm, Signer]) -> Signer:
    """The EdDSA key, the spec's recommended algorithm."""
    return signers["EdDSA"]


@pytest.fixture(scope="session")
def other_signer() -> Signer:
    """A key registered by another organization, under the same `kid` as `signer`."""
    return _make_signer("EdDSA")


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def issuers(signers: dict[Algorithm, Signer], other_signer: Signer) -> InMemoryIssuers:
    """ISS registered by ORG with the three keys; OTHER_ISS by OTHER_ORG with another key."""
    table = InMemoryIssuers()
    table.register(ISS, ORG, [s.key for s in signers.values()])
    table.register(OTHER_ISS, OTHER_ORG, [other_signer.key])
    return table
