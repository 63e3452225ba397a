"""A text client for Parley's conversation socket: type the user's turns, print every frame.

Run it (Python 3.11+, `pip install httpx websockets`):

    python examples/tools/talk.py --key parley_sk_... --agent bistro \\
        --var restaurant="Trattoria Roma" --say "A table for two at half past seven, for Ada."

It takes a session token with the API key (`POST /v1/auth/session_token`), opens
`/v1/sts/ws` with it, sends `config` (the `--var` values as `template_variables`), waits for
the agent's welcome message if it has one, then sends each `--say` as `generate_reply`
`{"user_message"}` once the reply before it has finished. It prints each frame on one line,
`→` for the client's and `←` for Parley's, audio shortened to `…`, and closes the socket
after the last reply (or when the agent ends the conversation). A voice client sends the
microphone's `audio_chunk`s instead of `generate_reply`: see examples/browser/index.html.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

WAIT_S = 60.0
"""The longest this client waits for any one frame."""


def show(arrow: str, frame: dict[str, Any]) -> None:
    shown = {**frame, "audio": "…"} if "audio" in frame else frame
    print(arrow, json.dumps(shown, ensure_ascii=False), flush=True)  # noqa: T201


async def send(ws: ClientConnection, frame: dict[str, Any]) -> None:
    show("→", frame)
    await ws.send(json.dumps(frame))


async def until_finished(ws: ClientConnection) -> bool:
    """Print frames until the agent finishes speaking (True) or ends the conversation."""
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))
        show("←", frame)
        if frame["type"] == "assistant_finished_speaking":
            return True
        if frame["type"] in ("assistant_ended_conversation", "error"):
            return False


async def talk(args: argparse.Namespace) -> None:
    base = args.url.rstrip("/")
    headers = {"Authorization": f"Bearer {args.key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as http:
        agent = (await http.get(f"/v1/agents/{args.agent}")).raise_for_status().json()["agent"]
        issued = (await http.post("/v1/auth/session_token", json={})).raise_for_status().json()
    ws_url = base.replace("https://", "wss://").replace("http://", "ws://")
    async with connect(f"{ws_url}/v1/sts/ws?session_token={issued['session_token']}") as ws:
        config = {
            "type": "config",
            "agent": args.agent,
            "input_format": "pcm_16000",
            "output_format": "pcm_16000",
        }
        variables = dict(pair.split("=", 1) for pair in args.var)
        await send(ws, config | ({"template_variables": variables} if variables else {}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))
            show("←", frame)
            if frame["type"] == "error":
                return
            if frame["type"] == "ready_to_start_conversation":
                break
        if agent["welcome_message"] and not await until_finished(ws):
            return
        for text in args.say:
            await send(ws, {"type": "generate_reply", "user_message": text})
            if not await until_finished(ws):
                return


def main() -> None:
    parser = argparse.ArgumentParser(description="Talk to a Parley agent in text.")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="Parley's base URL")
    parser.add_argument("--key", required=True, help="an API key (parley_sk_...)")
    parser.add_argument("--agent", required=True)
    parser.add_argument("--var", action="append", default=[], help="NAME=VALUE, repeatable")
    parser.add_argument("--say", action="append", default=[], help="a user turn, repeatable")
    asyncio.run(talk(parser.parse_args()))


if __name__ == "__main__":
    main()
