"""The token checker runs the verifier's own steps: for every failing row of the verifier's
table (tests/jwt/test_verify.py) it reports the same step and code, and the reason the
refusing step gave, so the checker cannot drift from the verifier."""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.jwt.kit import NOW, ORG, FrozenClock, InMemoryIssuers, Signer, claims_at
from tests.jwt.test_verify import TABLE, Ctx, Mutation

from parley.errors import ParleyError
from parley.jwt import InvalidToken, verify
from parley.services.token_check import run_checks

pytestmark = pytest.mark.anyio


def _failing_step(row_id: str) -> int:
    """The step a row fails: `4-sub-missing` is step 4, `order-3-before-4` step 3."""
    found = re.match(r"(?:order-)?(\d+)-", row_id)
    assert found, row_id
    return int(found.group(1))


ROWS = [
    pytest.param(*row.values, _failing_step(str(row.id)), id=row.id)
    for row in TABLE
    if row.id is not None
]


def test_verifier_table_rows_all_taken() -> None:
    assert len(ROWS) == len(TABLE)


@pytest.mark.parametrize(("mutation", "kind", "code", "step"), ROWS)
async def test_token_check_verifier_failure_same_step_code_and_reason(
    mutation: Mutation,
    kind: type[ParleyError],
    code: str,
    step: int,
    signer: Signer,
    other_signer: Signer,
    issuers: InMemoryIssuers,
    clock: FrozenClock,
) -> None:
    token = mutation(Ctx(signer, other_signer, issuers))
    with pytest.raises(kind) as refused:
        await verify(token, issuers=issuers, clock=clock)

    result = await run_checks(token, org_id=ORG, conversation_id=None, issuers=issuers, clock=clock)

    failed = result.failed
    assert failed is not None
    assert (failed.step, failed.code) == (step, code)
    assert [s.status for s in result.steps[: step - 1]] == ["passed"] * (step - 1)
    assert {s.status for s in result.steps[step:]} == {"not_run"}
    if isinstance(refused.value, InvalidToken):
        assert failed.reason == refused.value.detail != ""


async def test_token_check_conversation_id_rule_named_not_jti(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.token(conversation_id="a b", jti="j1")

    result = await run_checks(token, org_id=ORG, conversation_id=None, issuers=issuers, clock=clock)

    failed = result.failed
    assert failed is not None
    assert (failed.step, failed.code) == (4, "invalid_token")
    assert failed.reason.startswith("conversation_id `a b`")
    assert "jti" not in failed.reason


async def test_token_check_valid_token_passes_steps_1_to_9(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    claims: dict[str, Any] = claims_at(NOW)
    token = signer.token()

    result = await run_checks(
        token,
        org_id=ORG,
        conversation_id=claims["conversation_id"],
        issuers=issuers,
        clock=clock,
    )

    assert result.valid
    assert [s.status for s in result.steps] == ["passed"] * 9 + ["skipped"] * 2
