"""Fixtures for the attack tests: the same keys and issuers as tests/jwt, built from its kit."""

from __future__ import annotations

import pytest
from tests.jwt.kit import ISS, ORG, OTHER_ISS, OTHER_ORG, FrozenClock, InMemoryIssuers, Signer
from tests.jwt.kit import make_signer as _make_signer

from parley.jwt import Algorithm


@pytest.fixture(scope="session")
def signers() -> dict[Algorithm, Signer]:
    return {alg: _make_signer(alg) for alg in ("EdDSA", "ES256", "RS256")}


@pytest.fixture(scope="session")
def signer(signers: dict[Algorithm, Signer]) -> Signer:
    return signers["EdDSA"]


@pytest.fixture(scope="session")
def attacker() -> Signer:
    """The attacker's own key, registered by the attacker's organization under the same kid."""
    return _make_signer("EdDSA")


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def issuers(signers: dict[Algorithm, Signer], attacker: Signer) -> InMemoryIssuers:
    table = InMemoryIssuers()
    table.register(ISS, ORG, [s.key for s in signers.values()])
    table.register(OTHER_ISS, OTHER_ORG, [attacker.key])
    return table
