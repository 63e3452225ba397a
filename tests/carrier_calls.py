"""A placed call as the simulated carrier plays it (API.md section 15): the scenarios after
a create, and the carrier's side of the call, every callback signed as Twilio signs it. The
REST API that places calls is tests/carrier_api.py, whose module doc describes both."""

from __future__ import annotations

import asyncio
import contextlib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx
import numpy as np

from parley.engine import Samples
from parley.services.twilio_signature import sign
from tests.carrier import MediaStream, form_encode, new_call_sid, parse_twiml, phone_frames

DEFAULT_WORDS = "Hello, this is Sam speaking. Who is calling please?"
GREETING = "You have reached the voicemail of Sam. Please leave a message after the tone."


# --- scenarios ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    """A callee who answers and speaks `words` (rendered speech), AMD verdict `amd`."""

    words: str = DEFAULT_WORDS
    ring_s: float = 0.1
    amd: str | None = "human"


@dataclass(frozen=True)
class Busy:
    status: str = "busy"


@dataclass(frozen=True)
class NoAnswer:
    status: str = "no-answer"


@dataclass(frozen=True)
class Failed:
    status: str = "failed"


@dataclass(frozen=True)
class Voicemail:
    """An answering machine: its greeting, a beep, then `AnsweredBy=machine_end_beep`."""

    greeting: str = GREETING
    beep_s: float = 0.5
    verdict: str = "machine_end_beep"


Scenario = Person | Busy | NoAnswer | Failed | Voicemail


@dataclass(frozen=True)
class Target:
    """A transfer target: it answers (and later hangs up), or not (`status` of the Dial)."""

    answers: bool = True
    status: str = "no-answer"
    """`DialCallStatus` when it does not answer: `no-answer` or `busy`."""


def beep(seconds: float, hz: float = 1000.0) -> Samples:
    """An answering machine's tone at 24 kHz (tests/speech.py's rate)."""
    t = np.arange(round(seconds * 24_000)) / 24_000
    return (0.4 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


# --- one placed call ----------------------------------------------------------------------


@dataclass(frozen=True)
class Callback:
    """A signed callback the carrier sent, and Parley's answer."""

    url: str
    params: list[tuple[str, str]]
    status: int
    answer: str

    def field(self, name: str) -> str | None:
        return next((value for key, value in self.params if key == name), None)


@dataclass
class PlacedCall:
    """A call created through the API, as the carrier runs it."""

    sid: str
    form: list[tuple[str, str]]
    scenario: Scenario
    status: str = "queued"
    callbacks: list[Callback] = field(default_factory=list)
    streams: list[MediaStream] = field(default_factory=list)
    updates: list[list[tuple[str, str]]] = field(default_factory=list)
    fetched: list[tuple[str, bytes]] = field(default_factory=list)
    """`<Play>` audio fetched for a transfer target: (URL, body)."""
    dials: list[str] = field(default_factory=list)
    """The `<Dial>` TwiML of each dial, in order (an update's, then an action's)."""
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    dial: asyncio.Task[MediaStream | None] | None = None
    """The transfer under way: it ends with the caller's stream back, or None."""

    def field(self, name: str) -> str | None:
        return next((value for key, value in self.form if key == name), None)

    def sent(self, url_field: str) -> list[Callback]:
        """The callbacks sent to the URL of the create's field `url_field` (any query)."""
        base = (self.field(url_field) or "\0").partition("?")[0]
        return [c for c in self.callbacks if c.url.partition("?")[0] == base]

    def statuses(self) -> list[str | None]:
        return [c.field("CallStatus") for c in self.sent("StatusCallback")]

    async def wait_finished(self, within: float) -> None:
        """Wait until the call has ended; raise what broke the scenario, if anything did."""
        await asyncio.wait_for(self.finished.wait(), within)
        if self.task is not None and self.task.done() and not self.task.cancelled():
            failure = self.task.exception()
            if failure is not None:
                raise failure


# --- the carrier's side of a call ---------------------------------------------------------


class CallPlayer:
    """Plays placed calls for one account: the scenario after a create, a `<Dial>` update."""

    def __init__(
        self,
        *,
        account_sid: str,
        auth_token: str,
        http: httpx.AsyncClient,
        stream_route: Callable[[str], str] | None = None,
    ) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self._http = http
        self._route = stream_route or (lambda url: url)

    async def callback(self, call: PlacedCall, url: str, extra: Sequence[tuple[str, str]]) -> str:
        """POST a signed callback to `url` with the call's fields and `extra`; return the
        answer's text (a failed post is recorded with status 0)."""
        params = [
            ("AccountSid", self.account_sid),
            ("ApiVersion", "2010-04-01"),
            ("CallSid", call.sid),
            ("Direction", "outbound-api"),
            ("From", call.field("From") or ""),
            ("To", call.field("To") or ""),
            *extra,
        ]
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": "TwilioProxy/1.1",
            "X-Twilio-Signature": sign(self.auth_token, url, params),
        }
        try:
            response = await self._http.post(url, content=form_encode(params), headers=headers)
            status, answer = response.status_code, response.text
        except httpx.HTTPError:
            status, answer = 0, ""
        call.callbacks.append(Callback(url, params, status, answer))
        return answer

    async def _status(self, call: PlacedCall, status: str, *extra: tuple[str, str]) -> None:
        call.status = status
        url = call.field("StatusCallback")
        event = {"in-progress": "answered"}.get(status, status)
        terminal = status in ("completed", "busy", "no-answer", "failed", "canceled")
        if url and (terminal or event in call_events(call)):
            await self.callback(call, url, [("CallStatus", status), *extra])

    async def play(self, call: PlacedCall) -> None:
        scenario = call.scenario
        try:
            # Rendered first, in a thread: the media stream's clock runs from its start, so
            # a render on the event loop would be caught up with as a burst of frames.
            frames = await asyncio.to_thread(rendered, scenario)
            await self._status(call, "initiated")
            if isinstance(scenario, Failed):
                await self._status(call, "failed")
                return
            await self._status(call, "ringing")
            if call.hung_up.is_set():
                await self._status(call, "canceled")
                return
            if isinstance(scenario, Busy | NoAnswer):
                await self._status(call, scenario.status)
                return
            await asyncio.sleep(scenario.ring_s if isinstance(scenario, Person) else 0.1)
            if call.hung_up.is_set():
                await self._status(call, "canceled")
                return
            await self._status(call, "in-progress")
            stream = await self._answer(call, call.field("Url") or "")
            talking = asyncio.create_task(self._talk(call, stream, frames)) if stream else None
            while stream is not None:  # until the stream ends with no transfer to follow
                await stream.wait_closed(3600)
                if talking is not None:  # cut short by a hang-up or a transfer
                    talking.cancel()
                    await asyncio.gather(talking, return_exceptions=True)
                    talking = None
                dial, call.dial = call.dial, None
                stream = await dial if dial is not None else None
            await self._status(call, "completed", ("CallDuration", "1"))
        finally:
            call.finished.set()

    async def _answer(self, call: PlacedCall, url: str) -> MediaStream | None:
        """Fetch `url` as the answered call's TwiML; open its stream if it is one."""
        answer = await self.callback(call, url, [("CallStatus", "in-progress")])
        return await self._open(call, answer)

    async def _open(self, call: PlacedCall, answer: str) -> MediaStream | None:
        try:
            twiml = parse_twiml(answer)
        except (AssertionError, ET.ParseError):
            return None
        if twiml.stream_url is None:
            return None
        stream = await MediaStream.open(
            self._route(twiml.stream_url), twiml.parameters, call_sid=call.sid
        )
        call.streams.append(stream)
        return stream

    async def _talk(self, call: PlacedCall, stream: MediaStream, frames: list[bytes]) -> None:
        """The callee's side once the stream runs: a person's words, or a machine's
        greeting and beep (`frames`, rendered beforehand), then the AMD verdict."""
        scenario = call.scenario
        amd_url = call.field("AsyncAmdStatusCallback")
        await stream.speak(frames)
        verdict = (
            scenario.amd if isinstance(scenario, Person) else getattr(scenario, "verdict", None)
        )
        if verdict is not None and amd_url and call.field("AsyncAmd") == "true":
            detection = [("AnsweredBy", verdict), ("MachineDetectionDuration", "2400")]
            await self.callback(call, amd_url, detection)

    async def dial(
        self,
        call: PlacedCall,
        twiml: str,
        target: Target,
        next_target: Callable[[], Target] | None = None,
    ) -> MediaStream | None:
        """The carrier redirected to `<Dial>`: the stream stops, the target is rung; return
        the stream the `action`'s answer opens (the caller back with the agent), or None. An
        `action` answered with another `<Dial>` rings again (`next_target`'s target)."""
        for stream in call.streams:
            await stream.stop()
        call.dials.append(twiml)
        dial = ET.fromstring(twiml).find("Dial")  # noqa: S314 - Parley's TwiML, in a test
        assert dial is not None, twiml
        number = dial.find("Number")
        action = dial.get("action")
        child = new_call_sid()
        if target.answers:
            if number is not None and number.get("url"):
                await self._target_fetch(call, number.get("url") or "", child)
            if number is not None and number.get("statusCallback"):
                events = (number.get("statusCallbackEvent") or "").split()
                if "answered" in events:
                    await self.callback(
                        call,
                        number.get("statusCallback") or "",
                        [("CallStatus", "in-progress"), ("ParentCallSid", call.sid)],
                    )
            dial_status = "completed"
        else:
            dial_status = target.status
        if action:
            answer = await self.callback(
                call,
                action,
                [
                    ("DialCallSid", child),
                    ("DialCallStatus", dial_status),
                    ("CallStatus", "in-progress"),
                ],
            )
            if "<Dial" in answer:  # dial again
                again = next_target() if next_target is not None else Target()
                return await self.dial(call, answer, again, next_target)
            return await self._open(call, answer)
        return None

    async def _target_fetch(self, call: PlacedCall, url: str, child: str) -> None:
        """A warm transfer: the target's `<Number url>` TwiML, then the audio it plays."""
        answer = await self.callback(
            call,
            url,
            [("CallStatus", "in-progress"), ("ParentCallSid", call.sid), ("DialCallSid", child)],
        )
        with contextlib.suppress(ET.ParseError):
            for play in ET.fromstring(answer).iter("Play"):  # noqa: S314 - a test's own
                response = await self._http.get((play.text or "").strip())
                call.fetched.append((str(response.url), response.content))


def rendered(scenario: Scenario) -> list[bytes]:
    """What the callee's side says once answered, as 20 ms μ-law frames."""
    from tests.speech import spoken

    if isinstance(scenario, Person):
        return phone_frames(0.2, spoken(scenario.words), 0.1)
    if isinstance(scenario, Voicemail):
        return phone_frames(0.2, spoken(scenario.greeting), 0.3, beep(scenario.beep_s))
    return []


def call_events(call: PlacedCall) -> list[str]:
    """The `StatusCallbackEvent`s the create asked for."""
    return [value for key, value in call.form if key == "StatusCallbackEvent"]
