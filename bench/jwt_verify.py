"""Per-token cost of parley.jwt.verify beside a bare signature check, PyJWT and joserfc.

Run: `.venv/bin/python bench/jwt_verify.py [--tokens N] [--rounds R]`.

For each algorithm it mints one token and measures, in the same process and run:

- `parley`: `parley.jwt.verify`, steps 1 to 8 of API.md section 7, with an in-memory issuer
  lookup and a warm `KeyCache` serving a static key (the production code path);
- `bare`: `cryptography`'s verify of the same signature over the same bytes (for ES256 the
  DER form is prepared outside the loop), i.e. the cost no verifier can avoid;
- `pyjwt` and `joserfc`: their decode of the same token with signature, `iss`, `aud`, `exp`
  and required-claim checks, keys imported outside the loop.

Each figure is the best of `rounds` rounds of `tokens` verifications (best-of removes
scheduler noise); ratios are against `bare`. Targets (docs/performance.md): parley within
1.2x (EdDSA), 1.35x (ES256) and 2.0x (RS256) of bare, and faster than both libraries.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import warnings
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from joserfc import jwk as jose_jwk
from joserfc import jwt as jose_jwt

import jwt as pyjwt
from parley.clock import SystemClock
from parley.jwt import (
    CachedIssuerResolver,
    FetchedJwks,
    IssuerPolicy,
    KeyCache,
    KeySource,
    StoredJwks,
    generate_key_pair,
    import_jwk,
    mint_token,
    verify,
)
from parley.jwt._codec import b64url_decode

ISS, AUD = "https://backend.example.com", "parley.example.com"
TARGETS = {"EdDSA": 1.2, "ES256": 1.35, "RS256": 2.0}


class _NoFetch:
    async def fetch(self, url: str) -> FetchedJwks:  # noqa: ARG002
        raise AssertionError("static keys are never fetched")


class _NoStore:
    async def load(self, org_id: str) -> StoredJwks | None:  # noqa: ARG002
        return None

    async def save(self, org_id: str, jwks: StoredJwks) -> None:  # noqa: ARG002
        return None

    async def save_error(self, org_id: str, *, url: str, error: str) -> None:  # noqa: ARG002
        return None


class _NoThrottle:
    async def try_acquire(self, key: str, *, window_seconds: float) -> bool:  # noqa: ARG002
        return True


def _best_of(rounds: int, tokens: int, run: Callable[[int], None]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run(tokens)
        best = min(best, (time.perf_counter() - start) / tokens)
    return best * 1e6


def _bare_verifier(alg: str, public_key: Any, token: str) -> Callable[[], None]:
    header, payload, signature = token.encode("ascii").split(b".")
    data, sig = header + b"." + payload, b64url_decode(signature)
    if alg == "EdDSA":
        return lambda: public_key.verify(sig, data)
    if alg == "ES256":
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        ecdsa = ec.ECDSA(hashes.SHA256())
        return lambda: public_key.verify(der, data, ecdsa)
    pkcs1, sha256 = padding.PKCS1v15(), hashes.SHA256()
    return lambda: public_key.verify(sig, data, pkcs1, sha256)


def bench(alg: str, tokens: int, rounds: int) -> dict[str, float]:
    """Return µs per token for each verifier of one algorithm."""
    pair = generate_key_pair(alg, rsa_bits=2048)  # type: ignore[arg-type]
    jwk = pair.jwks["keys"][0]
    key = import_jwk(jwk)
    token = mint_token(
        pair.private_key_pem, kid=pair.kid, iss=ISS, aud=AUD, sub="user_1", conversation_id="c1"
    )
    clock = SystemClock()
    cache = KeyCache(fetcher=_NoFetch(), store=_NoStore(), throttle=_NoThrottle(), clock=clock)
    policy = IssuerPolicy(audience=AUD, keys=KeySource(org_id="org_1", static_keys=(jwk,)))
    policies = {ISS: policy}

    async def lookup(iss: str) -> IssuerPolicy | None:
        return policies.get(iss)

    resolver = CachedIssuerResolver(lookup, cache)

    async def parley_loop(n: int) -> None:
        for _ in range(n):
            await verify(token, issuers=resolver, clock=clock)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(parley_loop(1))  # warms the key cache
    bare = _bare_verifier(alg, key.public_key, token)
    jose_key = jose_jwk.import_key(dict(jwk))
    jose_claims = jose_jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": ISS},
        aud={"essential": True, "value": AUD},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        leeway=30,
    )

    def pyjwt_once() -> None:
        pyjwt.decode(
            token,
            key.public_key,
            algorithms=[alg],
            audience=AUD,
            issuer=ISS,
            leeway=30,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )

    def joserfc_once() -> None:
        decoded = jose_jwt.decode(token, jose_key, algorithms=[alg])
        jose_claims.validate(decoded.claims)

    def repeat(once: Callable[[], None]) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                once()

        return run

    runners: dict[str, Callable[[int], None]] = {
        "bare": repeat(bare),
        "parley": lambda n: loop.run_until_complete(parley_loop(n)),
        "pyjwt": repeat(pyjwt_once),
        "joserfc": repeat(joserfc_once),
    }
    results = {name: float("inf") for name in runners}
    for _ in range(rounds):  # interleaved, so drift affects every verifier alike
        for name, run in runners.items():
            results[name] = min(results[name], _best_of(1, tokens, run))
    loop.close()
    return results


def main() -> None:
    # joserfc warns that RFC 9864 deprecates the name "EdDSA"; Parley's contract uses it.
    warnings.filterwarnings("ignore", message="EdDSA is deprecated")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000, help="verifications per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the best one counts")
    args = parser.parse_args()
    print(
        f"{'alg':6} {'bare µs':>8} {'parley µs':>10} {'ratio':>6} {'target':>6} "
        f"{'pyjwt µs':>9} {'joserfc µs':>10}  parley faster than both"
    )
    for alg in ("EdDSA", "ES256", "RS256"):
        r = bench(alg, args.tokens, args.rounds)
        ratio = r["parley"] / r["bare"]
        faster = r["parley"] < min(r["pyjwt"], r["joserfc"])
        print(
            f"{alg:6} {r['bare']:8.1f} {r['parley']:10.1f} {ratio:6.2f} {TARGETS[alg]:6.2f} "
            f"{r['pyjwt']:9.1f} {r['joserfc']:10.1f}  {'yes' if faster else 'NO'}"
        )


if __name__ == "__main__":
    main()
