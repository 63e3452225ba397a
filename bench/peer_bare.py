"""Bare references for bench/http_load.py: FastAPI's `/health` and uvicorn's WebSocket.

`app` is a FastAPI app with one route, `GET /health`, answering `{"status": "ok"}`.
`ws_app` is a plain ASGI app: every WebSocket is accepted, then it waits for the client to
close (and answers a text message with the same text); anything else answers 404.
Run by http_load.py as `uvicorn peer_bare:app --app-dir bench` (or `peer_bare:ws_app`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

app = FastAPI()


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


async def ws_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] == "http":
        await receive()
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    while (message := await receive())["type"] == "websocket.receive":
        await send({"type": "websocket.send", "text": message.get("text") or ""})
