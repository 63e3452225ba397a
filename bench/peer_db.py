"""The naive peer plus one indexed SQLAlchemy read per request (bench/http_load.py).

The same PyJWT verification as peer_naive.py, then one `SELECT` by primary key through
SQLAlchemy's async engine (aiosqlite, or asyncpg for a `postgresql` URL). BENCH_DB_URL
names the database (default: `sqlite+aiosqlite:///peer.db` in the working directory); the
table `peer_conversations` is created at start-up with a thousand rows, one of them named
by BENCH_CONVERSATION_ID.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, HTTPException
from peer_naive import Claims, check_conversation
from sqlalchemy.ext.asyncio import create_async_engine

DB_URL = os.environ.get("BENCH_DB_URL", "sqlite+aiosqlite:///peer.db")
CONVERSATION_ID = os.environ.get("BENCH_CONVERSATION_ID", "bench-conversation")

metadata = sa.MetaData()
conversations = sa.Table(
    "peer_conversations",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("end_user", sa.String(64)),
)
engine = create_async_engine(DB_URL)


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        counted = sa.select(sa.func.count()).select_from(conversations)
        if not (await connection.execute(counted)).scalar():
            rows = [{"id": f"other-{n}", "status": "ended", "end_user": None} for n in range(999)]
            rows.append({"id": CONVERSATION_ID, "status": "pending", "end_user": None})
            await connection.execute(conversations.insert(), rows)
    yield
    await engine.dispose()


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
