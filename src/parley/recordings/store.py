"""The recording stores' interface: put, delete (and, for the server's own, find) whole
objects by key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class StoredObject:
    """A stored recording: a local file the server can serve with byte ranges."""

    path: Path
    size: int


class ObjectStore(Protocol):
    """Whole WAV files by key, written and deleted: the recordings directory and a policy's
    bucket alike. Every method raises OSError when the store cannot be used; a write is
    complete or absent, never partial."""

    async def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing what was there."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the object under `key`; nothing when there is none."""
        ...

    async def delete_many(self, keys: Sequence[str]) -> None:
        """`delete` each of `keys` (a retention sweep's batch), at once where the store can."""
        ...


class RecordingStore(ObjectStore, Protocol):
    """The server's own store (`{org_id}/{conversation_id}.wav`), whose files it serves at
    the signed `audio_url` (a bucket's objects are read at its presigned URL instead)."""

    async def find(self, key: str) -> StoredObject | None:
        """The object under `key`, or None when there is none."""
        ...
