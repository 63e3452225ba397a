"""Reading one conversation with the credential that asks (issue #23)."""

from __future__ import annotations

from parley.errors import InsufficientScope
from parley.records import Conversation, Principal
from parley.services.authn import authenticate
from parley.services.context import Context
from parley.services.conversations import get_conversation


async def read_conversation(
    ctx: Context, credential: str, conversation_id: str, *, client: str | None = None
) -> tuple[Principal, Conversation]:
    """Authenticate a read of one conversation, then return who read it and what.

    A JWT's conversation is read beside its admission (its `jti` claim waits for a group
    commit) instead of after it; admission's errors still come first, and what was read is
    returned only to an admitted token (issue #23). Other credentials read after
    authenticating, as every route does.
    """
    read_beside: list[Conversation] = []

    async def read_while_admitting(org_id: str, accessed: str) -> None:
        read_beside.append(
            await get_conversation(ctx, org_id=org_id, conversation_id=accessed, by_jwt=True)
        )

    principal = await authenticate(
        ctx,
        credential,
        conversation_id=conversation_id,
        while_admitting=read_while_admitting,
        client=client,
    )
    if not principal.may_access(conversation_id):
        raise InsufficientScope()
    if read_beside:
        return principal, read_beside[0]
    conversation = await get_conversation(
        ctx,
        org_id=principal.org_id,
        conversation_id=conversation_id,
        by_jwt=principal.kind == "jwt",
    )
    return principal, conversation
