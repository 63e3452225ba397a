"""The simulated carrier's REST API and what it plays after a call is placed (API.md section
15); part 3 of the simulated carrier of tests/carrier.py, whose signing, TwiML and media
stream it reuses.

`CarrierApi` is a real HTTP server on 127.0.0.1 (aiohttp, port 0) speaking Twilio's Calls
API as Parley calls it:

- `POST /2010-04-01/Accounts/{sid}/Calls.json` (create) and `…/Calls/{CallSid}.json`
  (update), form-encoded, HTTP Basic `account_sid:auth_token` checked: a wrong or missing
  credential gets 401 with Twilio's JSON error (`{"code": 20003, "message", "more_info",
  "status"}`), an unknown call 404 (code 20404); a create answers 201 `{"sid": "CA…",
  "status": "queued", …}`, an update 200 with the call resource;
- every request is recorded (`requests`: method, path, form fields in order, the Basic
  credentials) before it is answered, and `fail_next(...)` makes the next requests fail as
  programmed (`Failure.server_error()`, `Failure.twilio(400, 21211, "…")`,
  `Failure.slow(11)`, `Failure.redirect(url)`, `Failure.huge()`).

After each create the next scenario of `script(...)` (default `Person()`; the scenarios and
their playing are tests/carrier_calls.py) is played in the background as Twilio would, every
callback signed with the account's auth token over the exact URL posted to
(`X-Twilio-Signature`, by `parley.services.twilio_signature.sign`):

- `Person(words=…)`: `initiated`, `ringing`, `answered` status callbacks, the signed POST
  of `Url` (`CallSid`, `AccountSid`, `From`, `To`, `Direction=outbound-api`,
  `CallStatus=in-progress`), whose `<Connect><Stream>` is opened (tests/carrier.py's
  `MediaStream`); the callee's words (rendered by tests/speech.py, μ-law, sent in real time)
  are spoken, then `AnsweredBy=human` goes to the `AsyncAmdStatusCallback` (unless
  `amd=None`);
- `Busy()`, `NoAnswer()`, `Failed()`: the status callbacks up to `CallStatus` `busy`,
  `no-answer` or `failed`; no `Url` fetch;
- `Voicemail()`: answered as a person is, but a machine's greeting (rendered speech, then a
  1 kHz beep) plays, then the async AMD callback `AnsweredBy=machine_end_beep`.

Once the media stream ends (the server closed it, or a hang-up) the `completed` status
callback is sent. An update with `Status=completed|canceled` hangs the call up (`stop` on the
stream, `completed` or `canceled`). An update with `<Dial>` TwiML stops the media stream and
plays the transfer target of `transfer_to(...)` (default `Target(answers=True)`): answering,
it fetches the `<Number url>` (and the `<Play>` audio it names), posts the `<Number>`'s
`answered` `statusCallback`, then the `<Dial action>` with `DialCallStatus=completed`; not
answering, the `action` with `DialCallStatus` `no-answer` (or `busy`), and a
`<Connect><Stream>` answer to it is opened again (the caller is back). Each placed call is a
`PlacedCall` in `calls`, with the callbacks sent and their answers, its media streams and a
`finished` event.

    async with CarrierApi(account_sid=…, auth_token=…) as api:
        api.script(Voicemail())
        ... run Parley with PARLEY_TWILIO_API_URL=api.url ...
        call = await api.wait_call()
        await call.wait_finished(30)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl

import httpx
from aiohttp import web

from parley.services.twilio_signature import sign
from tests.carrier import new_account_sid, new_auth_token, new_call_sid
from tests.carrier_calls import CallPlayer, Person, PlacedCall, Scenario, Target

CALLS_PATH = "/2010-04-01/Accounts/{account}/Calls.json"
CALL_PATH = "/2010-04-01/Accounts/{account}/Calls/{call}.json"
DEFAULT_WORDS = "Hello, this is Sam speaking. Who is calling please?"
GREETING = "You have reached the voicemail of Sam. Please leave a message after the tone."


# --- what the API records and how it can fail -------------------------------------------


@dataclass(frozen=True)
class ApiRequest:
    """One request to the REST API, as received."""

    method: str
    path: str
    form: list[tuple[str, str]]
    username: str | None
    password: str | None
    content_type: str
    user_agent: str
    at: float = field(default_factory=time.monotonic)
    """When it arrived (monotonic)."""

    def field(self, name: str) -> str | None:
        return next((value for key, value in self.form if key == name), None)

    def fields(self, name: str) -> list[str]:
        return [value for key, value in self.form if key == name]


@dataclass(frozen=True)
class Failure:
    """How the API answers one request instead of doing it."""

    status: int = 500
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/plain"})
    delay_s: float = 0.0
    stream_bytes: int = 0
    """Send this many filler bytes (chunked, no Content-Length) instead of `body`."""

    @classmethod
    def server_error(cls) -> Failure:
        return cls(status=500, body=b"Internal Server Error")

    @classmethod
    def twilio(cls, status: int, code: int, message: str) -> Failure:
        """Twilio's own error body."""
        return cls(
            status=status,
            body=json.dumps(twilio_error(status, code, message)).encode(),
            headers={"Content-Type": "application/json"},
        )

    @classmethod
    def slow(cls, delay_s: float) -> Failure:
        return cls(status=201, body=b'{"sid": "CA' + b"0" * 32 + b'"}', delay_s=delay_s)

    @classmethod
    def redirect(cls, location: str) -> Failure:
        return cls(status=307, headers={"Location": location})

    @classmethod
    def huge(cls, size: int = 10 * 1024 * 1024) -> Failure:
        return cls(status=201, headers={"Content-Type": "application/json"}, stream_bytes=size)


def twilio_error(status: int, code: int, message: str) -> dict[str, Any]:
    return {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }


# --- the API ------------------------------------------------------------------------------


class CarrierApi:
    """Twilio's Calls API on 127.0.0.1, and the carrier behind it (see the module doc)."""

    def __init__(
        self,
        *,
        account_sid: str | None = None,
        auth_token: str | None = None,
        http: httpx.AsyncClient | None = None,
        port: int = 0,
        stream_route: Callable[[str], str] | None = None,
    ) -> None:
        """`port`: where the API listens (0: any free port). `http` sends the callbacks and
        `stream_route` maps a TwiML stream URL to the one to open: a test that serves
        Parley behind a public URL it does not resolve routes them to loopback."""
        self.account_sid = account_sid or new_account_sid()
        self.auth_token = auth_token or new_auth_token()
        self.requests: list[ApiRequest] = []
        self.dropped_after: list[float] = []
        """For each slow failure the client gave up on: seconds from its arrival until the
        client dropped the connection (the client's own time-out, measured here)."""
        self.calls: dict[str, PlacedCall] = {}
        self._failures: list[Failure] = []
        self._drop_seen = asyncio.Event()
        self._scenarios: list[Scenario] = []
        self._targets: list[Target] = []
        self._created = asyncio.Condition()
        self._http = http or httpx.AsyncClient(timeout=15)
        self.player = CallPlayer(
            account_sid=self.account_sid,
            auth_token=self.auth_token,
            http=self._http,
            stream_route=stream_route,
        )
        self._runner: web.AppRunner | None = None
        self.port = port

    @property
    def url(self) -> str:
        """The base URL to set as PARLEY_TWILIO_API_URL."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> CarrierApi:
        app = web.Application()
        app.router.add_post("/2010-04-01/Accounts/{account}/Calls.json", self._create)
        app.router.add_post("/2010-04-01/Accounts/{account}/Calls/{call}.json", self._update)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for call in self.calls.values():
            if call.task is not None:
                call.task.cancel()
            for stream in call.streams:
                with contextlib.suppress(Exception):
                    await stream.close()
        tasks = [call.task for call in self.calls.values() if call.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        await self._http.aclose()

    # --- what the test programs -----------------------------------------------------------

    def fail_next(self, *failures: Failure) -> None:
        """Answer the next requests with `failures`, one each, instead of doing them."""
        self._failures.extend(failures)

    def script(self, *scenarios: Scenario) -> None:
        """Play `scenarios` after the next creates, one each (then `Person()`)."""
        self._scenarios.extend(scenarios)

    def transfer_to(self, *targets: Target) -> None:
        """The next `<Dial>` updates reach these targets, one each (then one that answers)."""
        self._targets.extend(targets)

    async def wait_call(self, index: int = 0, within: float = 30) -> PlacedCall:
        """The `index`-th call created (waiting for it)."""
        async with self._created:
            await asyncio.wait_for(self._created.wait_for(lambda: len(self.calls) > index), within)
        return list(self.calls.values())[index]

    def sign(self, url: str, params: Sequence[tuple[str, str]]) -> str:
        return sign(self.auth_token, url, params)

    async def dropped(self, within_s: float = 5.0) -> float:
        """The one slow failure's `dropped_after`, once the carrier has seen the drop (its
        client may hear its own time-out a moment before the carrier sees the close)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drop_seen.wait(), within_s)
        (waited,) = self.dropped_after
        return waited

    # --- the handlers ---------------------------------------------------------------------

    async def _received(self, request: web.Request) -> tuple[ApiRequest, web.StreamResponse | None]:
        """Record the request; answer a programmed failure or a bad credential."""
        body = await request.read()
        form = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        username, password = _basic(request.headers.get("Authorization"))
        seen = ApiRequest(
            request.method,
            request.path,
            form,
            username,
            password,
            request.headers.get("Content-Type", ""),
            request.headers.get("User-Agent", ""),
        )
        self.requests.append(seen)
        if self._failures:
            return seen, await self._fail(request, self._failures.pop(0), seen.at)
        if (username, password) != (self.account_sid, self.auth_token) or request.match_info[
            "account"
        ] != self.account_sid:
            return seen, web.json_response(
                twilio_error(401, 20003, "Authentication Error - invalid username"), status=401
            )
        return seen, None

    async def _fail(
        self, request: web.Request, failure: Failure, arrived: float
    ) -> web.StreamResponse:
        if failure.delay_s and await _dropped_within(request, failure.delay_s):
            self.dropped_after.append(time.monotonic() - arrived)
            self._drop_seen.set()
        if not failure.stream_bytes:
            return web.Response(status=failure.status, body=failure.body, headers=failure.headers)
        response = web.StreamResponse(status=failure.status, headers=failure.headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = b"x" * 65_536
        with contextlib.suppress(ConnectionError):
            for _ in range(failure.stream_bytes // len(chunk)):
                await response.write(chunk)
        return response

    async def _create(self, request: web.Request) -> web.StreamResponse:
        seen, refused = await self._received(request)
        if refused is not None:
            return refused
        for required in ("To", "From", "Url"):
            if not seen.field(required):
                message = f"Required parameter {required} missing."
                return web.json_response(twilio_error(400, 21201, message), status=400)
        scenario = self._scenarios.pop(0) if self._scenarios else Person()
        call = PlacedCall(sid=new_call_sid(), form=seen.form, scenario=scenario)
        async with self._created:
            self.calls[call.sid] = call
            self._created.notify_all()
        call.task = asyncio.create_task(self.player.play(call))
        return web.json_response(self._resource(call), status=201)

    async def _update(self, request: web.Request) -> web.StreamResponse:
        seen, refused = await self._received(request)
        if refused is not None:
            return refused
        call = self.calls.get(request.match_info["call"])
        if call is None:
            message = f"The requested resource {request.path} was not found"
            return web.json_response(twilio_error(404, 20404, message), status=404)
        call.updates.append(seen.form)
        if call.status in ("completed", "busy", "no-answer", "failed", "canceled"):
            message = "Call is not in-progress. Cannot redirect."
            return web.json_response(twilio_error(400, 21220, message), status=400)
        twiml, status = seen.field("Twiml"), seen.field("Status")
        if status in ("completed", "canceled"):
            call.hung_up.set()
            for stream in call.streams:
                await stream.stop()
        elif twiml is not None:
            call.dial = asyncio.create_task(
                self.player.dial(call, twiml, self._next_target(), self._next_target)
            )
        return web.json_response(self._resource(call))

    def _next_target(self) -> Target:
        return self._targets.pop(0) if self._targets else Target()

    def _resource(self, call: PlacedCall) -> dict[str, Any]:
        return {
            "sid": call.sid,
            "account_sid": self.account_sid,
            "to": call.field("To"),
            "from": call.field("From"),
            "status": call.status,
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "uri": CALL_PATH.format(account=self.account_sid, call=call.sid),
        }


def _basic(header: str | None) -> tuple[str | None, str | None]:
    if header is None or not header.startswith("Basic "):
        return None, None
    try:
        decoded = base64.b64decode(header.removeprefix("Basic "), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    username, sep, password = decoded.partition(":")
    return (username, password) if sep else (None, None)


async def _dropped_within(request: web.Request, seconds: float) -> bool:
    """Wait up to `seconds`; tell whether the client dropped the connection meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        transport = request.transport
        if transport is None or transport.is_closing():
            return True
        await asyncio.sleep(0.02)
    return False
