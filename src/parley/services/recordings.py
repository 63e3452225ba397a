"""Recordings (API.md section 16): kept when a conversation ends, served by signed URL.

A recording is the stereo WAV of services/live/recorder.py, kept in the instance's
recording store (`ctx.recordings`: `PARLEY_RECORDINGS_DIR`) under
`{org_id}/{conversation_id}.wav`; the conversation row then names its key.

`audio_url` is `{PARLEY_PUBLIC_URL}/v1/conversations/{id}/audio?expires=…&signature=…`,
valid for an hour: the signature is an HMAC-SHA256 (a key derived from
`PARLEY_SECRET_KEY`, so every instance of a fleet signs alike) over the organization, the
conversation and the expiry, so the URL needs no bearer credential, like a presigned URL.
The URL names no organization (the contract's path): the server finds the conversations
with that ID that have a recording and checks the signature against each.

A store that fails is tried again (`KEEP_RETRY_SECONDS`) while the process runs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Final
from urllib.parse import quote

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.errors import ConversationNotFound, Forbidden
from parley.recordings import StoredObject
from parley.records import Conversation
from parley.services.context import Context

log = logging.getLogger(__name__)

URL_SECONDS: Final = 3600
"""How long an `audio_url` is valid (API.md section 16: one hour)."""
KEEP_RETRY_SECONDS: Final = (1.0, 5.0, 30.0, 120.0, 600.0)
"""The waits between tries of a recording the store refused (a full disk, a lost mount)."""
SIGNING_PURPOSE: Final = "recording-url"
DRAIN_SECONDS: Final = 10.0
"""How long a stopping server waits for the recordings still being kept."""


class InvalidAudioSignature(Forbidden):
    """A recording's URL whose signature is wrong, missing or expired: one answer for all."""

    code = "invalid_signature"
    message = "The recording's URL is not valid: its signature is wrong or has expired."


def recording_key(org_id: str, conversation_id: str) -> str:
    """Where a conversation's recording is kept in the store."""
    return f"{org_id}/{conversation_id}.wav"


async def keep(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    render: Callable[[], Awaitable[bytes]],
    retry_seconds: tuple[float, ...] = KEEP_RETRY_SECONDS,
) -> bool:
    """Render the recording and put it in the store, then name it on the conversation;
    a store that fails is tried again after each of `retry_seconds`. False when there is
    no store, or every try failed (logged)."""
    store = ctx.recordings
    if store is None:
        return False
    wav = await render()
    key = recording_key(org_id, conversation_id)
    for wait in (*retry_seconds, None):
        try:
            await store.put(key, wav)
            break
        except OSError as error:
            if wait is None:
                log.error("recording of %s not kept: %s", conversation_id, error)
                return False
            log.warning(
                "recording of %s not kept yet (%s); again in %g s", conversation_id, error, wait
            )
            await asyncio.sleep(wait)
    async with ctx.db.transaction() as session:
        return await conversation_repo.set_recording(
            session, org_id, conversation_id, key=key, at=utcnow(ctx.clock)
        )


_pending: set[asyncio.Task[bool]] = set()
"""Recordings being kept in the background (`keep_later`), until `drain`."""


def keep_later(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    render: Callable[[], Awaitable[bytes]],
) -> None:
    """`keep` in the background: the socket that recorded it closes without waiting."""
    task = asyncio.create_task(
        keep(ctx, org_id=org_id, conversation_id=conversation_id, render=render),
        name=f"keep-recording-{conversation_id}",
    )
    _pending.add(task)
    task.add_done_callback(_kept)


def _kept(task: asyncio.Task[bool]) -> None:
    _pending.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("a recording could not be kept", exc_info=error)


async def drain() -> None:
    """Wait (`DRAIN_SECONDS` at most) for the recordings being kept: a stopping server
    keeps those of the conversations its shutdown ended."""
    if _pending:
        await asyncio.wait(set(_pending), timeout=DRAIN_SECONDS)


def with_audio_url(ctx: Context, conversation: Conversation) -> Conversation:
    """The conversation with its signed `audio_url` when it has a recording."""
    if conversation.recording_key is None or conversation.audio_deleted_at is not None:
        return conversation
    return replace(conversation, audio_url=audio_url(ctx, conversation.org_id, conversation.id))


def audio_url(ctx: Context, org_id: str, conversation_id: str) -> str:
    """A URL of the recording, valid for `URL_SECONDS` from now."""
    expires = int(ctx.clock.time()) + URL_SECONDS
    signature = _sign(ctx, org_id, conversation_id, expires)
    path = quote(conversation_id, safe="")
    return f"{ctx.public_url}/v1/conversations/{path}/audio?expires={expires}&signature={signature}"


async def open_audio(
    ctx: Context, conversation_id: str, *, expires: str | None, signature: str | None
) -> StoredObject:
    """The recording a signed URL names; 403 `invalid_signature` for a wrong, missing or
    expired signature, 404 when the recording is gone."""
    if not expires or not signature or not expires.isdigit() or len(expires) > 12:
        raise InvalidAudioSignature()
    if int(expires) < ctx.clock.time():
        raise InvalidAudioSignature()
    async with ctx.db.statement() as connection:
        candidates = await conversation_repo.recordings_named(connection, conversation_id)
    found = [
        key
        for org_id, key in candidates
        if hmac.compare_digest(_sign(ctx, org_id, conversation_id, int(expires)), signature)
    ]
    if not found:
        raise InvalidAudioSignature()
    stored = await ctx.recordings.find(found[0]) if ctx.recordings is not None else None
    if stored is None:
        raise ConversationNotFound("The conversation's recording is not kept here.")
    return stored


def _sign(ctx: Context, org_id: str, conversation_id: str, expires: int) -> str:
    message = f"{org_id}\n{conversation_id}\n{expires}".encode()
    digest = hmac.new(ctx.secrets.derive(SIGNING_PURPOSE), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
