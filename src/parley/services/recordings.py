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

A recording is never lost: it is written to the database (`recording_uploads`) before
its store is tried, and stays there until the store has it; the timer of any instance tries
again when it is due (`RETRY_SECONDS`), after a restart too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Final
from urllib.parse import quote, urlsplit

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import recording_uploads as upload_repo
from parley.errors import ConversationNotFound, Forbidden
from parley.outbound import resolve_host
from parley.recordings import ObjectStore, StoredObject
from parley.recordings.bucket import BucketSettings, BucketStore
from parley.records import Conversation, StorageSettings
from parley.services import storage_policies
from parley.services.context import Context

log = logging.getLogger(__name__)

URL_SECONDS: Final = 3600
"""How long an `audio_url` is valid (API.md section 16: one hour)."""
RETRY_SECONDS: Final = (1.0, 5.0, 30.0, 120.0, 600.0, 3600.0)
"""The waits after each failed try of a recording's upload (a full disk, a lost mount, a
bucket down); the last repeats: a recording is never given up while its store exists."""
CLAIM: Final = timedelta(seconds=120)
"""How long a try holds its upload: the timers of other instances leave it alone until
then (a try that dies with its instance is taken up again after it)."""
RETRIES_PER_TICK: Final = 20
"""Uploads tried again per step of the timer at most."""
SIGNING_PURPOSE: Final = "recording-url"


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
    policy_id: str | None = None,
) -> bool:
    """Render the recording, keep it in the database until its store has it, and try the
    store at once; True when it is stored. False when there is nowhere to keep it (no
    recordings directory and no policy: logged) or the store failed: the upload waits in
    the database and `retry_due` tries again (`RETRY_SECONDS`), on any instance."""
    placed = await _placement(ctx, org_id, conversation_id, policy_id)
    if placed is None:
        log.warning("recording of %s not kept: no recording store is configured", conversation_id)
        return False
    store, key = placed
    wav = await render()
    upload = upload_repo.Upload(
        org_id=org_id,
        conversation_id=conversation_id,
        object_key=key,
        policy_id=policy_id,
        data=wav,
        attempts=0,
    )
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        await upload_repo.add(session, upload, now=now, first_try=now + CLAIM)
    return await _attempt(ctx, upload, store)


async def retry_due(ctx: Context, *, limit: int = RETRIES_PER_TICK) -> int:
    """Try again the uploads that are due (the timer's step; any instance's, one claim
    each); return how many were stored."""
    stored = 0
    for _ in range(limit):
        now = utcnow(ctx.clock)
        async with ctx.db.transaction() as session:
            upload = await upload_repo.claim_due(session, now=now, until=now + CLAIM)
        if upload is None:
            break
        placed = await _placement(ctx, upload.org_id, upload.conversation_id, upload.policy_id)
        if placed is None:
            await _give_up(ctx, upload, "its external storage policy was deleted")
            continue
        stored += await _attempt(ctx, upload, placed[0])
    return stored


async def _attempt(ctx: Context, upload: upload_repo.Upload, store: ObjectStore) -> bool:
    """Put the upload in its store: name it on the conversation and forget the upload, or
    record the failure and when to try again."""
    try:
        await store.put(upload.object_key, upload.data)
    except OSError as error:
        attempts = upload.attempts + 1
        wait = RETRY_SECONDS[min(attempts, len(RETRY_SECONDS)) - 1]
        log.warning(
            "recording of %s not stored yet (try %d: %s); again in %g s",
            upload.conversation_id,
            attempts,
            error,
            wait,
        )
        retry_at = utcnow(ctx.clock) + timedelta(seconds=wait)
        async with ctx.db.transaction() as session:
            await upload_repo.failed(
                session, upload, attempts=attempts, retry_at=retry_at, error=str(error)
            )
        return False
    async with ctx.db.transaction() as session:
        await conversation_repo.set_recording(
            session,
            upload.org_id,
            upload.conversation_id,
            key=upload.object_key,
            policy_id=upload.policy_id,
            at=utcnow(ctx.clock),
        )
        await upload_repo.remove(session, upload.org_id, upload.conversation_id)
    return True


async def _give_up(ctx: Context, upload: upload_repo.Upload, why: str) -> None:
    log.error("recording of %s dropped: %s", upload.conversation_id, why)
    async with ctx.db.transaction() as session:
        await upload_repo.remove(session, upload.org_id, upload.conversation_id)


async def _placement(
    ctx: Context, org_id: str, conversation_id: str, policy_id: str | None
) -> tuple[ObjectStore, str] | None:
    """The store and object key of a conversation's recording: the recordings directory
    (`{org_id}/{conversation_id}.wav`) or the policy's bucket (`{key_prefix}{id}.wav`)."""
    if policy_id is None:
        if ctx.recordings is None:
            return None
        return ctx.recordings, recording_key(org_id, conversation_id)
    bucket = await _bucket(ctx, org_id, policy_id)
    if bucket is None:
        return None
    store, prefix = bucket
    return _CheckedBucket(ctx, store), f"{prefix}{conversation_id}.wav"


class _CheckedBucket:
    """A policy's bucket whose endpoint is checked against the outbound address rules before
    each request (API.md 16: the endpoint URL follows them): a name that resolves to a
    private address is refused unless the operator allows private networks. boto3 resolves
    the name again when it connects; the window between the two is a DNS rebinding risk this
    check narrows, not closes (docs/decisions.md)."""

    def __init__(self, ctx: Context, store: BucketStore) -> None:
        self._ctx, self._store = ctx, store

    async def put(self, key: str, data: bytes) -> None:
        await self._check()
        await self._store.put(key, data)

    async def delete(self, key: str) -> None:
        await self.delete_many([key])

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self._check()
        await self._store.delete_many(keys)

    async def _check(self) -> None:
        policy = self._ctx.outbound_policy
        url = urlsplit(self._store.settings.endpoint_url)
        if url.hostname is None:
            raise OSError("the bucket's endpoint names no host")
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await resolve_host(url.hostname, port)
        except OSError as error:
            raise OSError(f"the bucket's endpoint could not be resolved: {error}") from None
        if (refusal := policy.address_refusal(addresses)) is not None:
            raise OSError(refusal)


async def _bucket(ctx: Context, org_id: str, policy_id: str) -> tuple[BucketStore, str] | None:
    """The policy's bucket and key prefix; None when the policy was deleted."""
    settings = await storage_policies.policy_store_settings(ctx, org_id, policy_id)
    if settings is None:
        return None
    return _bucket_store(settings), settings.key_prefix or ""


def _bucket_store(settings: StorageSettings) -> BucketStore:
    """One store (one boto3 client, its connection pool) per policy's settings, reused."""
    store = _buckets.pop(settings, None)
    if store is None:
        store = BucketStore(
            BucketSettings(
                endpoint_url=settings.endpoint_url,
                bucket=settings.bucket,
                region=settings.region,
                addressing_style=settings.addressing_style,
                access_key_id=settings.access_key_id,
                secret_access_key=settings.secret_access_key,
            )
        )
    _buckets[settings] = store  # most recently used last
    while len(_buckets) > BUCKET_CACHE:
        del _buckets[next(iter(_buckets))]
    return store


_buckets: dict[StorageSettings, BucketStore] = {}
BUCKET_CACHE: Final = 64
"""Policies whose stores are kept ready (a changed policy's settings make a new one)."""


async def with_audio_urls(ctx: Context, found: Sequence[Conversation]) -> list[Conversation]:
    """The conversations, each with its `audio_url` when it has a recording: this server's
    signed URL, or the bucket's presigned GET for a recording kept by a policy (a policy
    deleted since: no URL)."""
    buckets: dict[tuple[str, str], BucketStore | None] = {}
    shown = []
    for conversation in found:
        key = conversation.recording_key
        if key is None or conversation.audio_deleted_at is not None:
            shown.append(conversation)
            continue
        policy_id = conversation.recording_policy_id
        if policy_id is None:
            url: str | None = audio_url(ctx, conversation.org_id, conversation.id)
        else:
            at = (conversation.org_id, policy_id)
            if at not in buckets:
                bucket = await _bucket(ctx, *at)
                buckets[at] = bucket[0] if bucket is not None else None
            store = buckets[at]
            url = store.presigned_get(key, URL_SECONDS) if store is not None else None
        shown.append(replace(conversation, audio_url=url))
    return shown


async def delete_objects(ctx: Context, recordings: Iterable[tuple[str, str | None, str]]) -> None:
    """Delete recordings, (organization, policy or None, key) each, from their stores: one
    request per store. A policy deleted since has nothing left to delete here."""
    by_store: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for org_id, policy_id, key in recordings:
        by_store[(org_id if policy_id else "", policy_id)].append(key)
    for (org_id, policy_id), keys in by_store.items():
        if policy_id is None:
            if ctx.recordings is not None:
                await ctx.recordings.delete_many(keys)
            continue
        bucket = await _bucket(ctx, org_id, policy_id)
        if bucket is not None:
            await _CheckedBucket(ctx, bucket[0]).delete_many(keys)


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
