"""Wire models of the carrier account (API.md section 13), beside api/schemas.py.

Types are checked here; the shapes of `account_sid` and `auth_token` are
services/telephony.py's rules.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from parley.api.schemas import Input, Timestamp
from parley.clock import isoformat
from parley.records import TwilioAccount


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
