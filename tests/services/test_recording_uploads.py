"""A recording is never lost (API.md section 16): it waits in the database until its store
has it, is tried again when due by any instance (after a restart too), once per claim, and
a recording whose audio was deleted meanwhile is never stored."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from parley.db.repos import recording_uploads as upload_repo
from parley.outbound import AddressPolicy
from parley.recordings import StoredObject
from parley.recordings.directory import DirectoryStore
from parley.records import OPERATOR, RetentionPolicy, StoragePolicySpec
from parley.services import Context, conversations, recordings, retention, storage_policies
from tests.services.test_live_session import MovableClock
from tests.services.test_retention import agent_keeping, spoken_and_ended
from tests.services.webhook_helpers import local_context

pytestmark = pytest.mark.anyio


class FlakyStore:
    """A directory store that refuses every write while `down`, and counts the writes."""

    def __init__(self, root: Path) -> None:
        self.inner = DirectoryStore(root)
        self.down = True
        self.puts: list[str] = []

    async def put(self, key: str, data: bytes) -> None:
        if self.down:
            raise OSError("No space left on device")
        self.puts.append(key)
        await asyncio.sleep(0.05)  # a write takes a while: a second claimer would overlap
        await self.inner.put(key, data)

    async def find(self, key: str) -> StoredObject | None:
        return await self.inner.find(key)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self.inner.delete_many(keys)


@pytest.fixture
def flaky(
    ctx: Context, tmp_path: Path, timer_stopped: None
) -> tuple[Context, FlakyStore, MovableClock]:
    """The app's context with a store that is down, a clock the test moves, its timer
    stopped (the test runs the retries)."""
    store, clock = FlakyStore(tmp_path / "recordings"), MovableClock()
    return dataclasses.replace(ctx, recordings=store, clock=clock), store, clock


async def recorded_while_down(ctx: Context) -> tuple[str, str]:
    """An ended conversation whose recording the store refused: (organization, ID)."""
    org_id, agent = await agent_keeping(ctx, RetentionPolicy())
    conversation_id = await spoken_and_ended(
        ctx, org_id, agent, items=1, recorded=False, after_call=False
    )

    async def wav() -> bytes:
        return b"RIFF-kept-through-an-outage"

    assert not await recordings.keep(
        ctx, org_id=org_id, conversation_id=conversation_id, render=wav
    )
    return org_id, conversation_id


async def waiting(ctx: Context, org_id: str, conversation_id: str) -> bool:
    async with ctx.db.statement() as connection:
        return await upload_repo.waiting(connection, org_id, conversation_id)


async def test_recording_store_down_waits_in_the_database_then_stored_when_due(
    flaky: tuple[Context, FlakyStore, MovableClock],
) -> None:
    ctx, store, clock = flaky
    org_id, conversation_id = await recorded_while_down(ctx)
    assert await waiting(ctx, org_id, conversation_id)
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert found.audio_url is None  # not stored yet

    assert await recordings.retry_due(ctx) == 0  # the first retry is due in a second
    clock.ahead = recordings.RETRY_SECONDS[0] + 1
    assert await recordings.retry_due(ctx) == 0  # still down: the next in five seconds
    clock.ahead += recordings.RETRY_SECONDS[1] - 1
    assert await recordings.retry_due(ctx) == 0  # not due yet
    store.down = False
    clock.ahead += 2
    assert await recordings.retry_due(ctx) == 1
    assert not await waiting(ctx, org_id, conversation_id)
    key = recordings.recording_key(org_id, conversation_id)
    stored = await store.find(key)
    assert stored is not None
    assert stored.path.read_bytes() == b"RIFF-kept-through-an-outage"
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert found.audio_url is not None


async def test_recording_upload_survives_a_restart_another_instance_stores_it(
    flaky: tuple[Context, FlakyStore, MovableClock], database_url: str, tmp_path: Path
) -> None:
    """The instance that recorded it is gone (its memory with it): a new one, on the same
    database and directory, finds the upload and stores it."""
    ctx, _store, clock = flaky
    org_id, conversation_id = await recorded_while_down(ctx)
    async with local_context(database_url, instance_id="restarted") as raw:
        restarted = dataclasses.replace(
            raw, clock=clock, recordings=DirectoryStore(tmp_path / "recordings")
        )
        clock.ahead = recordings.RETRY_SECONDS[0] + 1
        assert await recordings.retry_due(restarted) == 1
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert found.recording_key == recordings.recording_key(org_id, conversation_id)


async def test_recording_upload_two_instances_at_once_each_stored_once(
    flaky: tuple[Context, FlakyStore, MovableClock], database_url: str
) -> None:
    ctx, store, clock = flaky
    made = [await recorded_while_down(ctx) for _ in range(4)]
    store.down = False
    clock.ahead = recordings.RETRY_SECONDS[0] + 1
    async with local_context(database_url, instance_id="other-instance") as raw:
        other = dataclasses.replace(raw, clock=clock, recordings=store)
        counts = await asyncio.gather(recordings.retry_due(ctx), recordings.retry_due(other))
    assert sum(counts) == 4
    assert sorted(store.puts) == sorted(recordings.recording_key(*made_one) for made_one in made)


async def test_recording_deleted_while_waiting_is_never_stored(
    flaky: tuple[Context, FlakyStore, MovableClock],
) -> None:
    """DELETE of the conversation while its recording waits: the upload goes with it."""
    ctx, store, clock = flaky
    org_id, conversation_id = await recorded_while_down(ctx)
    await retention.delete_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id, actor=OPERATOR
    )
    assert not await waiting(ctx, org_id, conversation_id)
    store.down = False
    clock.ahead = 3600
    assert await recordings.retry_due(ctx) == 0
    assert store.puts == []


async def test_retention_zero_hours_audio_deleted_once_stored_not_before(
    flaky: tuple[Context, FlakyStore, MovableClock],
) -> None:
    ctx, store, clock = flaky
    org_id, agent = await agent_keeping(ctx, RetentionPolicy(audio_hours=0))
    conversation_id = await spoken_and_ended(
        ctx, org_id, agent, items=1, recorded=False, after_call=False
    )

    async def wav() -> bytes:
        return b"RIFF"

    assert not await recordings.keep(
        ctx, org_id=org_id, conversation_id=conversation_id, render=wav
    )
    assert await retention.sweep(ctx) == 0  # due, but not stored yet: it waits
    store.down = False
    clock.ahead = recordings.RETRY_SECONDS[0] + 1
    assert await recordings.retry_due(ctx) == 1
    assert await retention.sweep(ctx) == 1
    assert await store.find(recordings.recording_key(org_id, conversation_id)) is None
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert found.audio_deleted_at is not None


async def test_recording_bucket_endpoint_resolving_to_a_private_address_refused_at_upload(
    flaky: tuple[Context, FlakyStore, MovableClock], caplog: pytest.LogCaptureFixture
) -> None:
    """The endpoint follows the outbound address rules at each upload, not only when the
    policy was made: with private networks no longer allowed, a loopback endpoint is
    refused before any request, and the recording waits (the switch may come back)."""
    ctx, _store, _clock = flaky
    allowing = dataclasses.replace(
        ctx, outbound_policy=AddressPolicy(allow_http=True, allow_private_networks=True)
    )
    org_id, agent = await agent_keeping(ctx, RetentionPolicy())
    spec = StoragePolicySpec(
        name="loopback",
        endpoint_url="http://127.0.0.1:9",
        bucket="parley-recordings",
        access_key_id="AKIAPARLEYTEST",
        secret_access_key="secret",
    )
    policy = await storage_policies.create_policy(
        allowing, org_id=org_id, project=None, spec=spec, actor=OPERATOR
    )
    conversation_id = await spoken_and_ended(
        ctx, org_id, agent, items=1, recorded=False, after_call=False
    )

    async def wav() -> bytes:
        return b"RIFF"

    refusing = dataclasses.replace(ctx, outbound_policy=AddressPolicy(allow_http=True))
    kept = await recordings.keep(
        refusing, org_id=org_id, conversation_id=conversation_id, render=wav, policy_id=policy.id
    )
    assert not kept
    assert await waiting(ctx, org_id, conversation_id)
    assert "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS" in caplog.text
