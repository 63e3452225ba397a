"""The carrier's REST API: Twilio's Calls resource, as Parley calls it (API.md section 15).

- `create_call`: `POST {api}/2010-04-01/Accounts/{AccountSid}/Calls.json` places a call
  (`To`, `From`, `Url`, `StatusCallback`, one `StatusCallbackEvent` per event,
  `MachineDetection=DetectMessageEnd`, `AsyncAmd=true`, `AsyncAmdStatusCallback`,
  `Timeout=30`); the carrier's 201 `{"sid": …}` gives the call's SID.
- `update_call`: `POST …/Calls/{CallSid}.json` with `Twiml` (a transfer) or `Status`
  (`completed` hangs up a live call, `canceled` a ringing one).
- HTTP Basic `account_sid:auth_token`; form-encoded UTF-8 bodies; JSON answers.

Through the one outbound client (STYLE convention 22: aiohttp's pools, the address it
checked, no redirects, no compressed answers) under a policy of its own: the API's URL is
the operator's (`PARLEY_TWILIO_API_URL`), trusted configuration, not a customer's, so http
and private addresses are allowed (tests point it at a loopback simulator) but only http(s)
and no userinfo. Limits: `TIMEOUT_SECONDS` (10 s) for the whole call, connection, headers
and body; `MAX_ANSWER_BYTES` (64 KiB) of answer. We do not use Twilio's helper library
(docs/decisions.md): its client is synchronous by default and brings its own HTTP stack.

Every failure is a `CarrierError` (502 `carrier_error`) whose message says what happened:
the carrier's own `message` and `code` from Twilio's JSON error body (`{"code", "message",
"more_info", "status"}`), cut to `MAX_MESSAGE_CHARS`, or that it did not answer in time, or
could not be reached, or answered a redirect (never followed: the credentials stay with the
configured host). The auth token never appears in a message, even if the carrier echoed it.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import quote, urlencode

from parley.errors import CarrierError
from parley.outbound.client import OutboundClient, OutboundResponse
from parley.outbound.errors import OutboundError
from parley.outbound.policy import AddressPolicy

DEFAULT_API_URL: Final = "https://api.twilio.com"
"""PARLEY_TWILIO_API_URL's default."""
TIMEOUT_SECONDS: Final = 10.0
"""One cap on a call to the API: resolution, connection, headers and body (API.md 15)."""
MAX_ANSWER_BYTES: Final = 64 * 1024
"""The largest answer read (a call resource is about 2 KiB; an error body less)."""
MAX_MESSAGE_CHARS: Final = 300
"""The carrier's message is passed on up to this many characters."""
RING_SECONDS: Final = 30
"""`Timeout`: how long the callee's phone rings before the call is `no-answer`."""
STATUS_EVENTS: Final = ("initiated", "ringing", "answered", "completed")
"""The `StatusCallbackEvent`s asked for, one parameter each."""
API_VERSION: Final = "2010-04-01"
USER_AGENT: Final = "Parley-Carrier"
SID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""An account or call SID as a path segment: Twilio's `AC…`/`CA…` (34 characters) and the
UUIDs of carriers compatible with it; nothing that could change the path."""
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")

HangUp = Literal["completed", "canceled"]
"""`completed` ends a call in progress; `canceled` one that is queued or ringing."""


@dataclass(frozen=True, slots=True)
class CarrierAccount:
    """An organization's carrier credentials, unsealed for one call of the API."""

    account_sid: str
    auth_token: str = field(repr=False)

    @property
    def authorization(self) -> str:
        """The HTTP Basic `Authorization` value of `account_sid:auth_token`."""
        pair = f"{self.account_sid}:{self.auth_token}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def carrier_policy() -> AddressPolicy:
    """The address policy of the carrier's API: the operator's URL, http(s) only."""
    return AddressPolicy(
        allow_http=True,
        allow_private_networks=True,
        subject="The carrier's API",
        switches="PARLEY_TWILIO_API",
    )


class TwilioCalls:
    """Places and updates calls through Twilio's Calls API (or a carrier speaking it)."""

    def __init__(
        self,
        outbound: OutboundClient,
        *,
        api_url: str = DEFAULT_API_URL,
        timeout_s: float = TIMEOUT_SECONDS,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._outbound = outbound
        self._api_url = api_url.rstrip("/")
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._policy = carrier_policy()

    @property
    def api_url(self) -> str:
        """The API's base URL (PARLEY_TWILIO_API_URL, without a trailing slash)."""
        return self._api_url

    def calls_url(self, account_sid: str, call_sid: str | None = None) -> str:
        """`…/Accounts/{sid}/Calls.json`, or `…/Calls/{call_sid}.json` for one call."""
        base = f"{self._api_url}/{API_VERSION}/Accounts/{_segment(account_sid)}/Calls"
        return f"{base}/{_segment(call_sid)}.json" if call_sid is not None else base + ".json"

    async def create_call(
        self,
        account: CarrierAccount,
        *,
        to: str,
        from_: str,
        url: str,
        status_callback: str,
        amd_callback: str,
    ) -> str:
        """Place a call from `from_` to `to` whose TwiML is at `url`; return its SID.

        Asks for the status callbacks of `STATUS_EVENTS` at `status_callback` and for
        asynchronous answering-machine detection (the verdict at `amd_callback`), ringing
        `RING_SECONDS`. Raises CarrierError (see the module doc).
        """
        form = [
            ("To", to),
            ("From", from_),
            ("Url", url),
            ("StatusCallback", status_callback),
            *(("StatusCallbackEvent", event) for event in STATUS_EVENTS),
            ("MachineDetection", "DetectMessageEnd"),
            ("AsyncAmd", "true"),
            ("AsyncAmdStatusCallback", amd_callback),
            ("Timeout", str(RING_SECONDS)),
        ]
        answer = await self._post(account, self.calls_url(account.account_sid), form)
        sid = _json_object(answer).get("sid")
        if not isinstance(sid, str) or not SID.fullmatch(sid):
            raise CarrierError(
                "The carrier's API accepted the call but gave no call SID.", status=answer.status
            )
        return sid

    async def update_call(
        self,
        account: CarrierAccount,
        call_sid: str,
        *,
        twiml: str | None = None,
        status: HangUp | None = None,
    ) -> None:
        """Give a live call new TwiML (`twiml`) or end it (`status`): exactly one of them.

        Raises CarrierError (see the module doc), ValueError for neither or both.
        """
        if (twiml is None) == (status is None):
            raise ValueError("give twiml or status, not both")
        if status is not None and status not in ("completed", "canceled"):
            raise ValueError("status is completed or canceled")
        form = [("Twiml", twiml)] if twiml is not None else [("Status", str(status))]
        await self._post(account, self.calls_url(account.account_sid, call_sid), form)

    async def _post(
        self, account: CarrierAccount, url: str, form: list[tuple[str, str]]
    ) -> OutboundResponse:
        """POST `form` with the account's credentials; return a 2xx answer, else raise."""
        headers = {
            "Authorization": account.authorization,
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        try:
            answer = await self._outbound.request(
                "POST",
                url,
                policy=self._policy,
                headers=headers,
                content=urlencode(form, encoding="utf-8").encode("ascii"),
                timeout_s=self._timeout_s,
                max_bytes=self._max_bytes,
            )
        except OutboundError as failed:  # its message names no header, body or address
            raise CarrierError(_without(failed.message, account.auth_token)) from None
        if 200 <= answer.status < 300:
            return answer
        raise _refusal(answer, account.auth_token)


def _segment(sid: str) -> str:
    if not SID.fullmatch(sid):
        raise CarrierError("The SID is not one the carrier could have issued.")
    return quote(sid, safe="")


def _json_object(answer: OutboundResponse) -> dict[str, object]:
    try:
        value = json.loads(answer.body)
    except ValueError:  # UnicodeDecodeError too
        return {}
    return value if isinstance(value, dict) else {}


def _refusal(answer: OutboundResponse, auth_token: str) -> CarrierError:
    """The CarrierError of a non-2xx answer, passing on Twilio's `message` and `code`."""
    if 300 <= answer.status < 400:
        return CarrierError(
            f"The carrier's API answered with a redirect (HTTP {answer.status}), "
            "which is not followed.",
            status=answer.status,
        )
    body = _json_object(answer)
    code = body.get("code")
    carrier_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    said = body.get("message")
    text = f"The carrier's API refused the request (HTTP {answer.status}"
    text += f", error {carrier_code})" if carrier_code is not None else ")"
    if isinstance(said, str) and (said := _CONTROL.sub(" ", _without(said, auth_token)).strip()):
        if len(said) > MAX_MESSAGE_CHARS:
            said = said[: MAX_MESSAGE_CHARS - 1] + "…"
        text += f": {said}"
    else:
        text += "."
    return CarrierError(text, status=answer.status, carrier_code=carrier_code)


def _without(text: str, auth_token: str) -> str:
    """`text` with the auth token blanked out, should the carrier have echoed it."""
    return text.replace(auth_token, "[redacted]") if auth_token else text
