"""Wire models of the carrier account (API.md section 13), beside api/schemas.py.

Types are checked here; the shapes of `account_sid` and `auth_token` are
services/telephony.py's rules.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import (
    EndSec,
    Input,
    PhoneNumber,
    PokeSec,
    PokeText,
    Timestamp,
    ToolNames,
    VoiceId,
    VoicemailMessage,
)
from parley.clock import isoformat
from parley.records import OutboundCallRequest, TwilioAccount
from parley.text import Label, Text


class TwilioAccountPut(Input):
    account_sid: str = Field(max_length=64, description="`AC` followed by 32 hexadecimal digits.")
    auth_token: str = Field(
        max_length=64,
        description="32 hexadecimal digits; stored encrypted, never returned.",
        json_schema_extra={"writeOnly": True},
    )


class TwilioAccountOut(BaseModel):
    account_sid: str
    auth_token_last4: str = Field(description="The last 4 characters of the auth token.")
    voice_url: str = Field(
        description="What to paste into the carrier's console as the number's voice webhook "
        "(`A call comes in`, HTTP POST)."
    )
    updated_at: Timestamp

    @classmethod
    def of(cls, account: TwilioAccount, *, voice_url: str) -> TwilioAccountOut:
        return cls(
            account_sid=account.account_sid,
            auth_token_last4=account.auth_token_last4,
            voice_url=voice_url,
            updated_at=isoformat(account.updated_at),
        )


# --- outbound calls (API.md section 15) ----------------------------------------------------


class OutboundCallConfigIn(Input):
    """`config` of `POST /v1/conversations/outbound_call`: the agent, and what this call
    changes of its settings (a member not given keeps the agent's; the silence members'
    null turns them off)."""

    agent: Annotated[Label, StringConstraints(min_length=1, max_length=64)]
    project: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None
    from_phone_number: PhoneNumber | None = Field(
        default=None, description="One of the agent's numbers; default its first."
    )
    welcome_message: Annotated[Text, StringConstraints(max_length=2_000)] | None = None
    system_prompt: Annotated[Text, StringConstraints(max_length=20_000)] | None = None
    template_variables: (
        Annotated[
            dict[
                Annotated[Label, StringConstraints(max_length=64)],
                Annotated[Text, StringConstraints(max_length=2_000)],
            ],
            Field(max_length=100),
        ]
        | None
    ) = None
    voice_id: VoiceId | None = None
    tools: ToolNames | None = None
    no_input_poke_sec: PokeSec | None = None
    no_input_poke_text: PokeText | None = None
    no_input_end_conversation_sec: EndSec | None = None
    voicemail_message: VoicemailMessage | None = None

    SILENCE: ClassVar[frozenset[str]] = frozenset(
        {"no_input_poke_sec", "no_input_end_conversation_sec"}
    )
    """Members whose null is a value (off); every other null is as if not given."""

    def settings(self) -> dict[str, Any]:
        """The members that change the agent's settings for this call, as stored."""
        chosen = self.model_fields_set - {"agent", "project", "from_phone_number"}
        return {
            name: getattr(self, name)
            for name in sorted(chosen)
            if getattr(self, name) is not None or name in self.SILENCE
        }


class OutboundCallIn(Input):
    to_phone_number: PhoneNumber = Field(description="The number to call, E.164.")
    config: OutboundCallConfigIn
    dry_run: bool = Field(default=False, description="Check everything, place nothing.")

    def request(self) -> OutboundCallRequest:
        return OutboundCallRequest(
            to_phone_number=self.to_phone_number,
            agent=self.config.agent,
            project=self.config.project,
            from_phone_number=self.config.from_phone_number,
            settings=self.config.settings(),
            dry_run=self.dry_run,
        )


class OutboundCallOut(BaseModel):
    conversation_id: str | None
    dry_run: bool
