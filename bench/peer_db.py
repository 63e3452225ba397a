"""The naive peer plus one indexed SQLAlchemy read per request (bench/http_load.py).

The same PyJWT verification as peer_naive.py, then one `SELECT` by primary key through
SQLAlchemy's async engine (aiosqlite, or asyncpg for a `postgresql` URL). BENCH_DB_URL
names the database (default: `sqlite+aiosqlite:///peer.db` in the working directory); the
table `peer_conversations` is created at start-up with a thousand rows, one of them named
by BENCH_CONVERSATION_ID.

It is the one-write peer too (issue #23): `POST /v1/agents/{name}/disable` looks the bearer
API key up in a dict (BENCH_API_KEY) and runs one `UPDATE` of the agent's row by name in a
committed transaction (`peer_agents`, a thousand rows).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Header, HTTPException
from peer_naive import Claims, check_conversation
from sqlalchemy.ext.asyncio import create_async_engine

DB_URL = os.environ.get("BENCH_DB_URL", "sqlite+aiosqlite:///peer.db")
CONVERSATION_ID = os.environ.get("BENCH_CONVERSATION_ID", "bench-conversation")
API_KEYS = {os.environ.get("BENCH_API_KEY", "peer-key"): "peer-org"}
DISABLE_AGENT = os.environ.get("BENCH_DISABLE_AGENT", "bench-disable")

metadata = sa.MetaData()
conversations = sa.Table(
    "peer_conversations",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("end_user", sa.String(64)),
)
agents = sa.Table(
    "peer_agents",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("org_id", sa.String(64), nullable=False),
    sa.Column("disabled_at", sa.Float),
)
engine = create_async_engine(DB_URL)


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    for attempt in range(10):  # two workers seed at once: the loser retries, then finds it
        try:
            await _seed()
            break
        except sa.exc.DBAPIError:
            if attempt == 9:
                raise
            await asyncio.sleep(0.3)
    yield
    await engine.dispose()


async def _seed() -> None:
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        counted = sa.select(sa.func.count()).select_from(conversations)
        if not (await connection.execute(counted)).scalar():
            rows = [{"id": f"other-{n}", "status": "ended", "end_user": None} for n in range(999)]
            rows.append({"id": CONVERSATION_ID, "status": "pending", "end_user": None})
            await connection.execute(conversations.insert(), rows)
            names = [f"other-{n}" for n in range(999)] + [DISABLE_AGENT]
            await connection.execute(
                agents.insert(), [{"name": n, "org_id": "peer-org"} for n in names]
            )


app = FastAPI(lifespan=lifespan)


@app.get("/v1/conversations/{conversation_id}")
async def read_conversation(conversation_id: str, verified: Claims) -> dict[str, Any]:
    check_conversation(verified, conversation_id)
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                sa.select(conversations).where(conversations.c.id == conversation_id)
            )
        ).first()
    if row is None:
        raise HTTPException(404, "conversation not found")
    return {"conversation": {"id": row.id, "status": row.status, "end_user": verified["sub"]}}


@app.post("/v1/agents/{name}/disable")
async def disable_agent(name: str, authorization: str = Header()) -> dict[str, bool]:
    scheme, _, key = authorization.partition(" ")
    org_id = API_KEYS.get(key) if scheme.lower() == "bearer" else None
    if org_id is None:
        raise HTTPException(401, "unauthorized")
    async with engine.begin() as connection:
        done = await connection.execute(
            sa.update(agents)
            .where(agents.c.name == name, agents.c.org_id == org_id)
            .values(disabled_at=time.time())
        )
    if done.rowcount == 0:
        raise HTTPException(404, "agent not found")
    return {"success": True}
