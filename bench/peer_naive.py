"""The naive peer of bench/http_load.py: FastAPI verifying Parley's EdDSA JWT with PyJWT.

`GET /v1/conversations/{conversation_id}` takes `Authorization: Bearer <JWT>` through an
`HTTPBearer` dependency, verifies the token with PyJWT (EdDSA, issuer, audience, expiry)
and its `conversation_id` claim against the path, and answers a small JSON body. It touches
no database. Configured by environment: BENCH_JWT_JWK (the public JWK as JSON),
BENCH_JWT_ISSUER, BENCH_JWT_AUDIENCE. Run by http_load.py as
`uvicorn peer_naive:app --app-dir bench`.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

import jwt

PUBLIC_KEY = jwt.PyJWK(json.loads(os.environ["BENCH_JWT_JWK"]), algorithm="EdDSA").key
ISSUER = os.environ["BENCH_JWT_ISSUER"]
AUDIENCE = os.environ["BENCH_JWT_AUDIENCE"]

bearer = HTTPBearer()


def claims(
    credentials: Annotated[HTTPAuthorizationCredentials, Depends(bearer)],
) -> dict[str, Any]:
    """The verified claims of the bearer JWT; 401 when it does not verify."""
    try:
        verified: dict[str, Any] = jwt.decode(
            credentials.credentials,
            PUBLIC_KEY,
            algorithms=["EdDSA"],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["exp", "iat", "sub", "conversation_id"]},
        )
    except jwt.InvalidTokenError:
        raise HTTPException(401, "invalid token") from None
    return verified


Claims = Annotated[dict[str, Any], Depends(claims)]


def check_conversation(verified: dict[str, Any], conversation_id: str) -> None:
    if verified["conversation_id"] != conversation_id:
        raise HTTPException(403, "conversation_id mismatch")


app = FastAPI()


@app.get("/v1/conversations/{conversation_id}")
async def read_conversation(conversation_id: str, verified: Claims) -> dict[str, Any]:
    check_conversation(verified, conversation_id)
    return {"conversation": {"id": conversation_id, "end_user": verified["sub"]}}
