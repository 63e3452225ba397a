"""A real HTTP server on loopback speaking OpenAI's streaming chat-completions protocol.

GET /v1/models lists one model `m` (what `parley serve` checks at start-up);
POST /v1/chat/completions with `"stream": true` answers `text/event-stream`: one
`data: {chat.completion.chunk}` event per piece of `reply`, then `data: [DONE]`. Tests
steer it (`reply`, `status`, `delay_s` before the first piece, `stall_s` after the first)
and read what Parley sent (`requests`, with the Authorization header of each).

A request without `"stream": true` (the work after a call: summaries, extractions,
evaluations; replays) gets one whole `chat.completion` whose content is the answer's text
pieces joined, with the round's calls as `message.tool_calls`, after `delay_s`; `rounds`
scripts those too, one per request, and each request's body (its `response_format`
included) is in `requests`.

Tool calls (function calling, streamed as OpenAI does): `rounds` is a queue of scripted
answers, one taken per request (text pieces, then calls, each call's arguments split over
the chunks given, at the index given, with or without an id; `interleave` sends parallel
calls' chunks in turn). With `rounds` empty, `forever` (if set) answers every request that
offers `tools` (a model that calls a tool in every round); any other request gets `reply`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.jwks_server import serving


@dataclass
class Received:
    body: dict[str, Any]
    authorization: str | None


@dataclass
class Call:
    """One scripted tool call; `arguments` is streamed one piece per chunk."""

    name: str
    arguments: list[str] = field(default_factory=lambda: ["{}"])
    id: str | None = None  # None: the chunks carry no id
    index: int = 0


@dataclass
class Round:
    """One scripted answer: text pieces, then tool calls."""

    text: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    interleave: bool = False


@dataclass
class Script:
    reply: list[str] = field(default_factory=lambda: ["Sure. ", "Your table ", "is booked."])
    status: int = 200
    delay_s: float = 0.0
    stall_s: float = 0.0
    rounds: deque[Round] = field(default_factory=deque)
    forever: Round | None = None

    def answer(self, body: dict[str, Any]) -> Round:
        """Return the answer to one request (see the module doc)."""
        if self.rounds:
            return self.rounds.popleft()
        if self.forever is not None and body.get("tools"):
            return self.forever
        return Round(text=list(self.reply))


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = Script()
        self.requests: list[Received] = []
        self.listings: list[str | None] = []  # the Authorization header of each GET /models
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        return

    def do_GET(self) -> None:
        """GET /v1/models, as OpenAI lists models: what `parley serve` checks at start-up."""
        script = self.server.script
        self.server.listings.append(self.headers.get("Authorization"))
        if self.path != "/v1/models" or script.status != 200:
            payload = json.dumps({"error": {"message": "no such thing", "type": "server"}})
            self._plain(script.status if script.status != 200 else 404, payload)
            return
        models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "test"}]}
        self._plain(200, json.dumps(models))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.record(Received(body, self.headers.get("Authorization")))
        script = self.server.script
        if self.path != "/v1/chat/completions" or script.status != 200:
            payload = json.dumps({"error": {"message": "model overloaded", "type": "server"}})
            self._plain(script.status if script.status != 200 else 404, payload)
            return
        try:
            if body.get("stream"):
                self._stream(script, body)
            else:
                self._whole(script, body)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (a timeout test)

    def _whole(self, script: Script, body: dict[str, Any]) -> None:
        """One `chat.completion`, not streamed: the answer's text in one message."""
        time.sleep(script.delay_s)
        answer = script.answer(body)
        message: dict[str, Any] = {"role": "assistant", "content": "".join(answer.text)}
        if answer.calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for index, call in enumerate(answer.calls)
            ]
        completion = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if answer.calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        self._plain(200, json.dumps(completion))

    def _stream(self, script: Script, body: dict[str, Any]) -> None:
        time.sleep(script.delay_s)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self._event({"role": "assistant", "content": ""}, body)
        answer = script.answer(body)
        for index, piece in enumerate(answer.text):
            self._event({"content": piece}, body)
            if index == 0 and script.stall_s:
                time.sleep(script.stall_s)
        for delta in _call_deltas(answer):
            self._event({"tool_calls": [delta]}, body)
        self._event({}, body, finish="tool_calls" if answer.calls else "stop")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _event(
        self, delta: dict[str, Any], body: dict[str, Any], finish: str | None = None
    ) -> None:
        chunk = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()

    def _plain(self, status: int, payload: str) -> None:
        data = payload.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def json_round(value: Any) -> Round:
    """A scripted whole answer whose text is `value` as JSON (a string is sent as it is)."""
    return Round(text=[value if isinstance(value, str) else json.dumps(value)])


def _call_deltas(answer: Round) -> list[dict[str, Any]]:
    """Return the `delta.tool_calls` items of an answer's calls, one per chunk."""
    per_call: list[list[dict[str, Any]]] = []
    for call in answer.calls:
        first: dict[str, Any] = {
            "index": call.index,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        if call.id is not None:
            first["id"] = call.id
        pieces = [{"index": call.index, "function": {"arguments": a}} for a in call.arguments]
        per_call.append([first, *pieces])
    if not answer.interleave:
        return [delta for deltas in per_call for delta in deltas]
    longest = max((len(deltas) for deltas in per_call), default=0)
    return [deltas[i] for i in range(longest) for deltas in per_call if i < len(deltas)]


@contextmanager
def running_chat_server() -> Iterator[ChatServer]:
    with serving(ChatServer()) as server:
        yield server
