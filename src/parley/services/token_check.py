"""The token checker: run API.md section 7 on a customer's token and explain each step.

Rules:
1. The real steps decide (`parley.jwt`'s step functions, in order) and the first failure is
   reported. Steps 1, 4 and 8 (many rules each) give the reason the step itself attached
   (`InvalidToken.detail`), so the checker cannot explain a rule other than the one that
   refused; the other steps check one rule each and are explained from the token's values.
2. Only the caller's organization counts: a token whose `iss` another organization
   registered gets the same answer as an unknown issuer, and nothing of that organization.
3. Nothing is spent: step 10 (rate limit) and step 11 (`jti`) are never run, so the token
   stays usable; the token itself is never part of the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final, Literal

from parley import jwt
from parley.clock import Clock, isoformat
from parley.errors import JwksUnavailable, ParleyError
from parley.services.context import Context

StepStatus = Literal["passed", "failed", "skipped", "not_run"]

STEPS: Final = (
    (1, "well-formed token"),
    (2, "issuer registered"),
    (3, "key and signature"),
    (4, "claim types"),
    (5, "audience"),
    (6, "expiry"),
    (7, "not before"),
    (8, "issued-at and lifetime"),
    (9, "conversation_id"),
    (10, "rate limit"),
    (11, "jti not replayed"),
)


STATUS_LABELS: Final[dict[str, str]] = {
    "passed": "passed",
    "failed": "failed",
    "skipped": "skipped",
    "not_run": "not run",
}
"""Each status in words, for a person (the dashboard)."""


@dataclass(frozen=True, slots=True)
class StepResult:
    step: int
    check: str
    status: StepStatus
    code: str | None
    reason: str

    @property
    def status_label(self) -> str:
        """The status in words (`not run`, not `not_run`)."""
        return STATUS_LABELS[self.status]


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """Every step's outcome, in order; steps after a failure are `not_run`."""

    steps: tuple[StepResult, ...]

    @property
    def failed(self) -> StepResult | None:
        return next((s for s in self.steps if s.status == "failed"), None)

    @property
    def valid(self) -> bool:
        return self.failed is None


class _Stop(Exception):
    """A step failed; the results so far are final."""


class _Report:
    def __init__(self) -> None:
        self.results: list[StepResult] = [
            StepResult(number, label, "not_run", None, "") for number, label in STEPS
        ]

    def mark(self, step: int, status: StepStatus, reason: str, code: str | None = None) -> None:
        self.results[step - 1] = replace(
            self.results[step - 1], status=status, reason=reason, code=code
        )

    def fail(self, step: int, error: ParleyError, reason: str) -> _Stop:
        self.mark(step, "failed", reason, error.code)
        return _Stop()


SignatureExplainer = Callable[[jwt.IssuerPolicy, jwt.ParsedToken, ParleyError], Awaitable[str]]
"""Explain a step 3 failure (which keys there are, when the JWKS was fetched)."""


async def check_token(
    ctx: Context, *, org_id: str, token: str, conversation_id: str | None
) -> TokenCheck:
    """Run the verification steps against the organization's settings, spending nothing."""

    async def explain_signature(
        policy: jwt.IssuerPolicy, parsed: jwt.ParsedToken, error: ParleyError
    ) -> str:
        if isinstance(error, JwksUnavailable):
            view = await ctx.jwt.key_cache.view(policy.keys)
            reason = "your JWKS cannot be fetched and no earlier copy exists"
            return f"{reason}: {view.error}" if view.error else reason
        return await _signature_problem(ctx, policy, parsed)

    return await run_checks(
        token,
        org_id=org_id,
        conversation_id=conversation_id,
        issuers=ctx.jwt.issuers,
        clock=ctx.clock,
        explain_signature=explain_signature,
    )


async def run_checks(
    token: str,
    *,
    org_id: str,
    conversation_id: str | None,
    issuers: jwt.IssuerResolver,
    clock: Clock,
    explain_signature: SignatureExplainer | None = None,
) -> TokenCheck:
    """Run steps 1 to 9 with the given issuers and clock; steps 10 and 11 are skipped."""
    report = _Report()
    try:
        await _run(report, token, org_id, conversation_id, issuers, clock, explain_signature)
    except _Stop:
        pass
    return TokenCheck(steps=tuple(report.results))


async def _run(
    report: _Report,
    token: str,
    org_id: str,
    conversation_id: str | None,
    issuers: jwt.IssuerResolver,
    clock: Clock,
    explain_signature: SignatureExplainer | None,
) -> None:
    try:
        parsed = jwt.parse_token(token)
    except jwt.InvalidToken as error:
        raise report.fail(1, error, error.detail) from None
    report.mark(1, "passed", f"alg {parsed.alg}, kid {_q(parsed.kid)}, iss {_q(parsed.iss)}")

    policy = await issuers.policy(parsed.iss)
    if policy is None or policy.org_id != org_id:
        reason = f"issuer {_q(parsed.iss)} is not registered for your organization"
        raise report.fail(2, jwt.IssuerNotRegistered(), reason)
    report.mark(2, "passed", f"issuer {_q(parsed.iss)} is one of yours")

    try:
        key = await jwt.check_signature(parsed, policy, issuers)
    except (jwt.InvalidSignature, JwksUnavailable) as error:
        reason = (
            await explain_signature(policy, parsed, error) if explain_signature else error.message
        )
        raise report.fail(3, error, reason) from None
    report.mark(3, "passed", f"signature verifies with key {_q(key.kid)} ({key.alg})")

    claims = parsed.claims
    try:
        jwt.check_claim_types(claims, policy)
    except jwt.InvalidToken as error:
        raise report.fail(4, error, error.detail) from None
    report.mark(4, "passed", "aud, sub, conversation_id, exp, iat (and nbf, jti) are well typed")

    try:
        jwt.check_audience(claims["aud"], policy)
    except jwt.InvalidAudience as error:
        reason = f"aud is {_q(claims['aud'])}; your audience is {_q(policy.audience)}"
        raise report.fail(5, error, reason) from None
    report.mark(5, "passed", f"aud names {_q(policy.audience)}")

    now = clock.time()
    exp: int = claims["exp"]
    iat: int = claims["iat"]
    nbf: int | None = claims.get("nbf")
    try:
        jwt.check_expiry(exp, now)
    except jwt.TokenExpired as error:
        reason = f"the token expired {_ago(now - exp)} ago (exp {_at(exp)}; 30 s of skew allowed)"
        raise report.fail(6, error, reason) from None
    report.mark(6, "passed", _expiry_note(exp, now))

    try:
        jwt.check_not_before(nbf, now)
    except jwt.TokenNotYetValid as error:
        later = nbf or 0
        reason = f"nbf is {_ago(later - now)} in the future ({_at(later)}); no skew is allowed"
        raise report.fail(7, error, reason) from None
    report.mark(7, "passed", "no nbf" if nbf is None else f"nbf {_at(nbf)} has passed")

    try:
        jwt.check_lifetime(iat, exp, now, policy)
    except jwt.InvalidToken as error:
        raise report.fail(8, error, error.detail) from None
    report.mark(8, "passed", f"lifetime {exp - iat} s (at most {policy.max_lifetime_seconds} s)")

    token_conversation = claims["conversation_id"]
    if conversation_id is None:
        report.mark(
            9, "skipped", f"no conversation given; the token names {_q(token_conversation)}"
        )
    elif token_conversation != conversation_id:
        reason = f"the token names {_q(token_conversation)}, not {_q(conversation_id)}"
        raise report.fail(9, jwt.ConversationIdMismatch(), reason)
    else:
        report.mark(9, "passed", f"the token names {_q(conversation_id)}")
    report.mark(10, "skipped", "the checker never counts against the rate limit")
    jti = claims.get("jti")
    report.mark(
        11,
        "skipped",
        "the token has no jti"
        if jti is None
        else "the checker never records a jti: the token can still be used once",
    )


# --- plain-words reasons --------------------------------------------------------------


def _q(value: object) -> str:
    return jwt.quoted(value)


def _ago(seconds: float) -> str:
    seconds = abs(int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172_800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86_400} days"


def _at(unix: int) -> str:
    return isoformat(datetime.fromtimestamp(unix, tz=UTC))


def _expiry_note(exp: int, now: float) -> str:
    if now > exp:
        return f"expired {_ago(now - exp)} ago, within the 30 s skew"
    return f"expires in {_ago(exp - now)} ({_at(exp)})"


async def _signature_problem(
    ctx: Context, policy: jwt.IssuerPolicy, parsed: jwt.ParsedToken
) -> str:
    view = await ctx.jwt.key_cache.view(policy.keys)
    kids = ", ".join(_q(k.kid) for k in view.keys) or "no usable key"
    named = [k for k in view.keys if k.kid == parsed.kid]
    if not named:
        if policy.keys.jwks_url is None:
            return f"kid {_q(parsed.kid)} is not among your static keys; they are {kids}"
        if view.fetched_at is None:
            return f"kid {_q(parsed.kid)} is not in your JWKS, which was never fetched"
        age = _ago(ctx.clock.time() - view.fetched_at)
        holds = f"it holds {kids}" if view.keys else "it holds no usable key"
        return f"kid {_q(parsed.kid)} is not in the JWKS fetched {age} ago; {holds}"
    if all(k.alg != parsed.alg for k in named):
        return (
            f"key {_q(parsed.kid)} is a {named[0].kty} key for {named[0].alg}; "
            f"the token says alg {parsed.alg}"
        )
    return f"the signature does not verify with key {_q(parsed.kid)} ({parsed.alg})"
